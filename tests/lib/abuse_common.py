"""What the abusive-client scripts share (tests/lib/router_abuse.py, server_abuse.py): a sampler
of the servers' resident memory, read from /proc every 50 ms while the abuse goes on, and the
small helpers every client needs (host and port of a URL, a percentile)."""
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
