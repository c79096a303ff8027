"""Abusive clients for tests/integration/agent_coord_abuse.sh: the router, a `ferry agent` and
`ferry coordinator` abused together, all on loopback and bounded in count and time. Each command
prints one JSON object.

The servers come from a JSON file (SPEC): a list of
  {"name", "url", "pid", "headers": {...},          every request's headers (the agent's token)
   "normal": [METHOD, PATH, BODY],                  the normal client's request (answer 200)
   "tiny": [METHOD, PATH, BODY],                    the tiny requests
   "big": [[METHOD, PATH], ...],                    requests to send oversized bodies to
   "slow_body": [METHOD, PATH] or null}             a route whose body is trickled

  normal SPEC N          each server's normal client alone (one after the other): latencies (ms);
                         ABUSE_NORMAL_RATE=R paces every normal client to R requests a second
  all SPEC SECONDS       everything at once, while a normal client per server runs (source
                         address 127.0.0.2, untouched by the per-address limits of the abusers):
                         120 slow sockets per server trickling header bytes (from ten addresses),
                         trickled bodies, oversized bodies (1 GiB declared; 64 MiB chunked),
                         1000 tiny requests per server over 6 keep-alive connections; a sampler
                         reads every server's VmRSS every 50 ms
  peraddr URL PATH LIMIT HEADERS_JSON
                         LIMIT connections from 127.0.6.1 held inside a request (body coming),
                         then one more: its request (10 MiB declared, headers only sent) must
                         get 429 with Retry-After and Connection: close, unread, and the
                         connection closed; after one held connection closes, a new one from
                         that address is served
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

from abuse_common import Sampler, hostport, open_slow, pct, trickle


def request(srv, method, path, body=b"", src="127.0.0.2", timeout=30, conn=None):
    """Returns (status, text, seconds, conn); status 0 when the connection failed."""
    h, p = hostport(srv["url"])
    t0 = time.monotonic()
    try:
        c = conn or http.client.HTTPConnection(h, p, timeout=timeout, source_address=(src, 0))
        c.request(method, path, body=body or None, headers=srv.get("headers", {}))
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        if conn is None:
            c.close()
        return r.status, text, time.monotonic() - t0, c
    except (OSError, http.client.HTTPException) as e:
        if conn is not None:
            conn.close()
        return 0, str(e), time.monotonic() - t0, None


def normal(srv, n, out, stop=None):
    """ABUSE_NORMAL_RATE=R in the environment: at most R requests a second (a client that
    keeps under the servers' max_requests_per_second_per_address); else as fast as answered."""
    lat, bad = [], []
    m, path, body = srv["normal"]
    rate = float(os.environ.get("ABUSE_NORMAL_RATE", "0") or 0)
    t_next = time.monotonic()
    for _ in range(n):
        if stop is not None and stop.is_set():
            break
        if rate > 0:
            t_next += 1.0 / rate
            if t_next > time.monotonic():
                time.sleep(t_next - time.monotonic())
        st, text, s, _ = request(srv, m, path, body.encode())
        lat.append(s * 1000)
        if st != 200:
            bad.append([st, text[:200]])
    out.update(p50=pct(lat, 0.5), p99=pct(lat, 0.99), max=pct(lat, 1.0), n=len(lat),
               bad=bad[:5], n_bad=len(bad))


def cmd_normal(spec, n):
    res = {}
    for srv in json.load(open(spec)):
        res[srv["name"]] = {}
        normal(srv, int(n), res[srv["name"]])
    return res


def slow_headers(srv, count, seconds, out):
    """count sockets from ten addresses trickling header bytes; when did the server drop them."""
    h, p = hostport(srv["url"])
    socks = []  # [sock, opened, closed_at, received]
    for i in range(count):
        socks.append(open_slow(h, p, f"127.0.7.{1 + i % 10}", b"GET / HTTP/1.1\r\nHost: x\r\n"))
    held = trickle(socks, seconds, b"X")
    out.update(sockets=len(socks), open_left=sum(1 for e in socks if e[2] is None),
               held_max_s=round(max(held), 2) if held else 0)


def slow_body(srv, count, seconds, out):
    """count requests whose 1 MiB body comes a byte every 0.5 s; when did the server drop them."""
    h, p = hostport(srv["url"])
    m, path = srv["slow_body"]
    socks = []
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in srv.get("headers", {}).items())
    start = f"{m} {path} HTTP/1.1\r\nHost: x\r\n{hdrs}Content-Length: 1048576\r\n\r\n".encode()
    for i in range(count):
        e = open_slow(h, p, "127.0.8.1", start)
        if e[0] is not None:  # one that could not connect is not counted here
            socks.append(e)
    held = trickle(socks, seconds, b"f", answer_ends=False)
    out.update(sockets=len(socks), open_left=sum(1 for e in socks if e[2] is None),
               held_min_s=round(min(held), 2) if held else 0,
               held_max_s=round(max(held), 2) if held else 0,
               answered=[e[3].split(b"\r\n", 1)[0].decode("utf-8", "replace") for e in socks
                         if e[3]][:3])


def big_declared(srv, method, path):
    """Headers declaring a 1 GiB body, then nothing: the answer must come unread."""
    h, p = hostport(srv["url"])
    t0 = time.monotonic()
    s = socket.create_connection((h, p), timeout=20, source_address=("127.0.0.3", 0))
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in srv.get("headers", {}).items())
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{hdrs}Content-Length: {1 << 30}\r\n"
                  "\r\n".encode() + b"x" * 65536)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError as e:
        data = str(e).encode()
    s.close()
    return [data.split(b"\r\n", 1)[0].decode("utf-8", "replace"), round(time.monotonic() - t0, 2)]


def big_chunked(srv, method, path, total=64 << 20):
    """A chunked body of total bytes sent as fast as the server takes it."""
    h, p = hostport(srv["url"])
    t0 = time.monotonic()
    s = socket.create_connection((h, p), timeout=30, source_address=("127.0.0.3", 0))
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in srv.get("headers", {}).items())
    chunk = b"%x\r\n" % (1 << 20) + b"z" * (1 << 20) + b"\r\n"
    sent = 0
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{hdrs}Transfer-Encoding: chunked\r\n"
                  "\r\n".encode())
        while sent < total:
            s.sendall(chunk)
            sent += 1 << 20
        s.sendall(b"0\r\n\r\n")
        data = s.recv(4096)
    except OSError as e:
        data = ("error after %d MiB: %s" % (sent >> 20, e)).encode()
    s.close()
    return [data.split(b"\r\n", 1)[0].decode("utf-8", "replace"), round(time.monotonic() - t0, 2),
            sent >> 20]


def tiny(srv, n, threads, out):
    h, p = hostport(srv["url"])
    m, path, body = srv["tiny"]
    counts = [[0, 0] for _ in range(threads)]

    def worker(i):
        c = None
        for _ in range(n // threads):
            if c is None:
                c = http.client.HTTPConnection(h, p, timeout=30,
                                               source_address=(f"127.0.9.{1 + i}", 0))
            st, _, _, c = request(srv, m, path, body.encode(), conn=c)
            counts[i][0 if st == 200 else 1] += 1
        if c is not None:
            c.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.update(ok=sum(c[0] for c in counts), bad=sum(c[1] for c in counts),
               seconds=round(time.monotonic() - t0, 2))


def cmd_all(spec, seconds):
    servers = json.load(open(spec))
    seconds = float(seconds)
    sampler = Sampler([s["pid"] for s in servers])
    sampler.start()
    res = {s["name"]: {"slow": {}, "tiny": {}, "normal": {}, "big": [], "slow_body": {}}
           for s in servers}
    threads = []

    def spawn(fn, *args):
        t = threading.Thread(target=fn, args=args)
        t.start()
        threads.append(t)

    def bigs(srv, out):
        for m, path in srv.get("big", []):
            out.append({"path": path, "declared_1GiB": big_declared(srv, m, path),
                        "chunked_64MiB": big_chunked(srv, m, path)})

    stop = threading.Event()
    normals = []
    for srv in servers:
        r = res[srv["name"]]
        spawn(slow_headers, srv, 120, seconds, r["slow"])
        if srv.get("slow_body"):
            spawn(slow_body, srv, 5, seconds, r["slow_body"])
        spawn(bigs, srv, r["big"])
        spawn(tiny, srv, 1000, 6, r["tiny"])
        t = threading.Thread(target=normal, args=(srv, 100000, r["normal"], stop))
        t.start()
        normals.append(t)
    for t in threads:
        t.join()
    stop.set()
    for t in normals:
        t.join()
    sampler.stop = True
    for srv in servers:
        res[srv["name"]]["rss_max_kib"] = sampler.max[srv["pid"]]
    return res


def cmd_peraddr(url, path, limit, headers):
    """LIMIT connections from 127.0.6.1 each inside a request whose body is still coming (so
    neither the header deadline nor the idle timeout closes them), then one more."""
    limit = int(limit)
    srv = {"url": url, "headers": json.loads(headers)}
    h, p = hostport(url)
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in srv["headers"].items())
    held = []
    for _ in range(limit):
        c = socket.create_connection((h, p), timeout=20, source_address=("127.0.6.1", 0))
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{hdrs}Content-Length: 100\r\n\r\n"
                  .encode() + b"0123456789")
        held.append(c)
    time.sleep(0.5)  # the server has counted them
    t0 = time.monotonic()
    s = socket.create_connection((h, p), timeout=20, source_address=("127.0.6.1", 0))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{hdrs}Content-Length: {10 << 20}\r\n\r\n"
              .encode())
    data, closed = b"", False
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            data += d
    except OSError as e:
        data += f"[{e}]".encode()
    s.close()
    over_s = round(time.monotonic() - t0, 3)
    head = data.split(b"\r\n\r\n", 1)[0].decode("utf-8", "replace")
    other = request(srv, "GET", path, src="127.0.6.2")[0]
    held_alive = 0
    for c in held:  # none was answered or closed meanwhile
        c.setblocking(False)
        try:
            held_alive += 0 if c.recv(1) == b"" else 0
        except BlockingIOError:
            held_alive += 1
        except OSError:
            pass
    # 30 more at once from that address, sending nothing: 16 over the limit are kept for their
    # 429 (up to 1 s), the rest closed at accept
    flood = []
    for _ in range(30):
        f = socket.socket()
        f.settimeout(5)
        f.bind(("127.0.6.1", 0))
        try:
            f.connect((h, p))
            flood.append(f)
        except OSError:
            f.close()
    time.sleep(0.5)
    at_once = 30 - len(flood)
    for f in flood:
        f.setblocking(False)
        try:
            if f.recv(1) == b"":
                at_once += 1
        except BlockingIOError:
            pass
        except OSError:
            at_once += 1
        f.close()
    held.pop().close()
    after = 0
    for _ in range(50):  # the server counts the close when the connection's thread ends
        after = request(srv, "GET", path, src="127.0.6.1")[0]
        if after == 200:
            break
        time.sleep(0.1)
    for c in held:
        c.close()
    return dict(status_line=head.split("\r\n", 1)[0], head=head, closed=closed, seconds=over_s,
                other_address=other, held_alive=held_alive, flood_closed_at_once=at_once,
                after_release=after)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    print(json.dumps(globals()["cmd_" + cmd](*args)))
