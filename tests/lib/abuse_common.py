"""What the abusive-client scripts share (tests/lib/router_abuse.py, server_abuse.py): a sampler
of the servers' resident memory, read from /proc every 50 ms while the abuse goes on, the loop
that trickles bytes into slow sockets (and opens them), and the small helpers every client needs
(host and port of a URL, a percentile)."""
import socket
import threading
import time
from urllib.parse import urlparse


def rss_kib(pid):
    """The process's VmRSS in KiB, -1 when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return -1
    return -1


class Sampler(threading.Thread):
    """Reads the VmRSS of each of pids every 50 ms until .stop is set; .max[pid] is the largest
    seen (KiB), .peak() the largest of them all."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.max, self.stop = pids, {p: 0 for p in pids}, False

    def run(self):
        while not self.stop:
            for p in self.pids:
                self.max[p] = max(self.max[p], rss_kib(p))
            time.sleep(0.05)

    def peak(self):
        return max(self.max.values(), default=0)


def hostport(url):
    u = urlparse(url)
    return u.hostname, u.port


def pct(xs, p):
    """The p-quantile of xs (0 <= p <= 1; 1 is the largest), to 0.1; None for no values."""
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 1) if xs else None


def open_slow(host, port, src, start):
    """A socket from address src to host:port that sent start (the first bytes of a request) and
    waits, non-blocking, as an entry for trickle: [sock, opened, None, b""]. One that could not
    connect is [None, t, t, b""] (done at once)."""
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((src, 0))
        s.connect((host, port))
        s.sendall(start)
        s.setblocking(False)
        return [s, time.monotonic(), None, b""]
    except OSError:
        s.close()
        t = time.monotonic()
        return [None, t, t, b""]


def trickle(socks, seconds, byte, answer_ends=True):
    """Sends byte on every open socket every 0.5 s for up to seconds, or until every one is done.
    Each entry is [sock or None, opened, done_at or None, received bytes]: done when the server
    closes it, or (answer_ends) as soon as it answers anything. Returns how long the done ones
    were held (seconds)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and any(e[2] is None for e in socks):
        for e in socks:
            if e[0] is None or e[2] is not None:
                continue
            try:
                e[0].send(byte)
                d = e[0].recv(4096)
                e[3] += d
                if d == b"" or answer_ends:
                    e[2] = time.monotonic()
            except BlockingIOError:
                pass
            except OSError:
                e[2] = time.monotonic()
        time.sleep(0.5)
    for e in socks:
        if e[0] is not None:
            e[0].close()
    return [e[2] - e[1] for e in socks if e[2] is not None]
