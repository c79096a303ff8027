"""Abusive clients for tests/integration/router_abuse.sh, all on loopback and bounded in count and
time. Each command prints one JSON object. A normal client (source address 127.0.0.2, so per-address
limits on the abusers do not touch it) runs `SELECT 1` through the router while the abuse goes on;
a sampler reads the router's VmRSS from /proc every 50 ms.

  normal URL N                     the normal client alone: latencies (ms)
  slow URL PID SECONDS             400 slow sockets trickling header bytes (300 from 127.0.1.1-10,
                                   100 from 127.0.0.1) while the normal client runs
  big URL PID                      bodies over the limits: passthrough, insert
  budget URL PID N BYTES           N bodies of BYTES each 9/10 sent and held at once until the
                                   router has read what it will (its budget's use, from
                                   /ferry/router, stops growing), then finished
  header URL PID                   a 64 KiB header
  nested URL PID DEPTH             a query of subqueries nested DEPTH deep
  head URL PID                     a 64 KiB INSERT head of "a,\\n" lines
  tiny URL PID N THREADS           N tiny requests over THREADS keep-alive connections (each
                                   from its own address) while the normal client runs
"""
import http.client
import json
import socket
import sys
import threading
import time

from abuse_common import Sampler, hostport, open_slow, pct, rss_kib, trickle


def query(url, body, src="127.0.0.2", timeout=30, headers=None):
    """POST body; returns (status, text, seconds); status 0 when the connection failed."""
    h, p = hostport(url)
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(h, p, timeout=timeout, source_address=(src, 0))
        c.request("POST", "/", body=body, headers=headers or {})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, text, time.monotonic() - t0
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e), time.monotonic() - t0


def normal(url, n, out, stop=None):
    lat, bad = [], []
    for _ in range(n):
        if stop is not None and stop.is_set():
            break
        st, text, s = query(url, b"SELECT 1")
        lat.append(s * 1000)
        if st != 200 or text.strip() != "1":
            bad.append([st, text[:200]])
    out.update(p50=pct(lat, 0.5), p99=pct(lat, 0.99), max=max(lat) if lat else None,
               n=len(lat), bad=bad[:5], n_bad=len(bad))


def cmd_normal(url, n):
    out = {}
    normal(url, int(n), out)
    return out


def cmd_slow(url, pid, seconds):
    seconds = float(seconds)
    h, p = hostport(url)
    sampler = Sampler([int(pid)])
    sampler.start()
    socks = []  # [sock, opened, closed_at, received]
    sources = [f"127.0.1.{1 + i // 30}" for i in range(300)] + ["127.0.0.1"] * 100
    for src in sources:
        socks.append(open_slow(h, p, src, b"POST / HTTP/1.1\r\nHost: x\r\n"))
    load = {}
    t = threading.Thread(target=normal, args=(url, 40, load))
    t.start()
    # a header byte every 0.5 s, so no idle timeout ever fires; done when the router closes or
    # answers
    trickle(socks, seconds, b"X")
    t.join()
    open_left = sum(1 for e in socks if e[2] is None)
    # over the per-address limit: cut 1 s after accept when no request came (a request would
    # get 429), well before the header deadline (3 s in router_abuse.sh)
    quick = sum(1 for e in socks if e[2] is not None and e[2] - e[1] < 2.5)
    per_addr_quick = sum(1 for src, e in zip(sources, socks) if src == "127.0.0.1"
                         and e[2] is not None and e[2] - e[1] < 2.5)
    held = [e[2] - e[1] for e in socks if e[2] is not None and e[2] - e[1] >= 2.5]
    sampler.stop = True
    return dict(sockets=len(socks), open_left=open_left, closed_quickly=quick,
                closed_quickly_127_0_0_1=per_addr_quick, held_max_s=max(held) if held else 0,
                held_n=len(held), normal=load, rss_max_kib=sampler.peak())


def cmd_big(url, pid):
    sampler = Sampler([int(pid)])
    sampler.start()
    res = {}
    st, text, s = query(url, b"SELECT 1 FORMAT TSV\n-- " + b"x" * (2 << 20), src="127.0.0.3")
    res["passthrough"] = [st, text[:300], round(s, 3)]
    body = b"INSERT INTO events FORMAT TSV\n" + b"t1\t1\t0\t1\t1\tv\n" * 400000  # ~5.6 MB
    st, text, s = query(url, body, src="127.0.0.3")
    res["insert"] = [st, text[:300], round(s, 3)]
    sampler.stop = True
    res["rss_max_kib"] = sampler.peak()
    return res


def cmd_budget(url, pid, n, size):
    n, size = int(n), int(size)
    sampler = Sampler([int(pid)])
    sampler.start()
    h, p = hostport(url)
    results = [None] * n
    half = threading.Barrier(n + 1)
    go = threading.Event()  # the second parts: once the router holds the first ones

    def holder(i):
        body = b"SELECT 1 FORMAT TSV\n-- " + b"y" * (size - 23)
        cut = size * 9 // 10
        try:
            c = http.client.HTTPConnection(h, p, timeout=60,
                                           source_address=(f"127.0.2.{1 + i}", 0))
            c.putrequest("POST", "/")
            c.putheader("Content-Length", str(len(body)))
            c.endheaders()
            c.send(body[:cut])
        except (OSError, http.client.HTTPException) as e:
            results[i] = [0, str(e)]
            half.wait()
            return
        half.wait()
        go.wait(30)
        try:
            c.send(body[cut:])
            r = c.getresponse()
            results[i] = [r.status, r.read().decode("utf-8", "replace")[-400:]]
        except (OSError, http.client.HTTPException) as e:
            results[i] = [0, str(e)]
        finally:
            c.close()

    ts = [threading.Thread(target=holder, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    half.wait()
    # the bodies' first parts may still sit in socket buffers: wait until the router has read
    # what it will (its budget's use stops growing), so the second parts all come on top of
    # them (on a loaded machine a fixed pause was not always enough)
    used, stable_since, t_end = -1, time.monotonic(), time.monotonic() + 15
    while time.monotonic() < t_end and time.monotonic() - stable_since < 1.0:
        try:
            c = http.client.HTTPConnection(h, p, timeout=5, source_address=("127.0.0.3", 0))
            c.request("GET", "/ferry/router")
            now = json.loads(c.getresponse().read()).get("memory_budget", {}).get("used", 0)
            c.close()
        except (OSError, ValueError, http.client.HTTPException):
            now = used
        if now != used:
            used, stable_since = now, time.monotonic()
        time.sleep(0.1)
    rss_held = rss_kib(int(pid))
    go.set()
    for t in ts:
        t.join()
    sampler.stop = True
    codes = {}
    for r in results:
        codes[str(r[0])] = codes.get(str(r[0]), 0) + 1
    over = sum(1 for r in results if "MEMORY_LIMIT_EXCEEDED" in r[1])
    return dict(statuses=codes, memory_limit_exceeded=over, rss_held_kib=rss_held,
                budget_used_held=used,
                rss_max_kib=sampler.peak(), sample=[r[1][-200:] for r in results[:2]])


def cmd_header(url, pid):
    h, p = hostport(url)
    s = socket.create_connection((h, p), timeout=20, source_address=("127.0.0.3", 0))
    try:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n"
                  b"Content-Length: 8\r\n\r\nSELECT 1")
        data = s.recv(4096)
    except OSError as e:
        data = str(e).encode()
    s.close()
    line = data.split(b"\r\n", 1)[0].decode("utf-8", "replace")
    return dict(answer=line, rss_kib=rss_kib(int(pid)))


def cmd_nested(url, pid, depth):
    depth = int(depth)
    q = b"SELECT * FROM " + b"(SELECT * FROM " * depth + b"events" + b")" * depth
    st, text, s = query(url, q, src="127.0.0.3", timeout=60)
    return dict(status=st, answer=text[:300], seconds=round(s, 3), rss_kib=rss_kib(int(pid)))


def cmd_head(url, pid):
    q = b"INSERT INTO events (" + b"a,\n" * ((64 << 10) // 3) + b"a) FORMAT TSV\n"
    st, text, s = query(url, q, src="127.0.0.3", timeout=60)
    return dict(status=st, answer=text[:300], seconds=round(s, 3), rss_kib=rss_kib(int(pid)))


def cmd_tiny(url, pid, n, threads):
    n, threads = int(n), int(threads)
    sampler = Sampler([int(pid)])
    sampler.start()
    h, p = hostport(url)
    counts = [[0, 0] for _ in range(threads)]  # [ok, bad]

    def worker(i):
        c = http.client.HTTPConnection(h, p, timeout=30, source_address=(f"127.0.3.{1 + i}", 0))
        for _ in range(n // threads):
            try:
                c.request("POST", "/", body=b"SELECT 1")
                r = c.getresponse()
                ok = r.status == 200 and r.read().strip() == b"1"
            except (OSError, http.client.HTTPException):
                ok = False
                c.close()
                c = http.client.HTTPConnection(h, p, timeout=30,
                                               source_address=(f"127.0.3.{1 + i}", 0))
            counts[i][0 if ok else 1] += 1
        c.close()

    load = {}
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    normal(url, 30, load)
    for t in ts:
        t.join()
    sampler.stop = True
    return dict(ok=sum(c[0] for c in counts), bad=sum(c[1] for c in counts),
                seconds=round(time.monotonic() - t0, 2), normal=load, rss_max_kib=sampler.peak())


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    print(json.dumps(globals()["cmd_" + cmd](*args)))
