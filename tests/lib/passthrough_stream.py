"""Large bodies through `ferry router`'s passthrough, for tests/integration/router_passthrough_stream.sh.
Each command prints one JSON object; a sampler reads the router's VmRSS from /proc every 50 ms.

  insert URL PID MB MODE   one INSERT INTO big FORMAT TSV of MB megabytes of rows (id, 100-byte
                           string), generated while it is sent (never held by this script):
                           MODE url      the statement in ?query=, the body chunked
                           MODE body     the statement at the body's start, with Content-Length
  select URL PID           SELECT * FROM big FORMAT TSV: the answer's bytes and line count, read
                           as they come
"""
import http.client
import json
import sys
import time
from urllib.parse import quote, urlparse

from abuse_common import Sampler


PAD = "x" * 100
ROWS_PER_CHUNK = 2000


def chunk(first):
    return "".join(f"{i}\t{PAD}\n" for i in range(first, first + ROWS_PER_CHUNK)).encode()


def insert(url, pid, mb, mode):
    u = urlparse(url)
    per = len(chunk(10**9))  # ids are padded below so every chunk has this size
    n_chunks = mb * 1000 * 1000 // per
    rows = n_chunks * ROWS_PER_CHUNK
    head = b"INSERT INTO big FORMAT TSV\n" if mode == "body" else b""

    def gen():
        if head:
            yield head
        for c in range(n_chunks):
            yield chunk(10**9 + c * ROWS_PER_CHUNK)

    size = len(head) + n_chunks * per
    s = Sampler([pid])
    s.start()
    t0 = time.monotonic()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    if mode == "url":
        c.request("POST", "/?query=" + quote("INSERT INTO big FORMAT TSV"), body=gen(),
                  encode_chunked=True)
    else:
        c.request("POST", "/", body=gen(), headers={"Content-Length": str(size)})
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    s.stop = True
    s.join()
    return dict(status=r.status, answer=text[:300], rows=rows, bytes=size,
                seconds=round(time.monotonic() - t0, 2), rss_max_kib=s.peak())


def select(url, pid):
    u = urlparse(url)
    s = Sampler([pid])
    s.start()
    t0 = time.monotonic()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", "/", body=b"SELECT id, s FROM big FORMAT TSV")
    r = c.getresponse()
    n, lines = 0, 0
    while True:
        b = r.read(1 << 16)
        if not b:
            break
        n += len(b)
        lines += b.count(b"\n")
    s.stop = True
    s.join()
    return dict(status=r.status, bytes=n, lines=lines, seconds=round(time.monotonic() - t0, 2),
                rss_max_kib=s.peak())


def main():
    cmd = sys.argv[1]
    if cmd == "insert":
        out = insert(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif cmd == "select":
        out = select(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
