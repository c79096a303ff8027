#!/usr/bin/python3
"""An HTTP proxy that adds a fixed delay to every request, in front of an S3 server on loopback
(s3rver), so a benchmark sees object-storage latency the way a server in a cloud region does
(tens of milliseconds to first byte) instead of loopback's fraction of a millisecond.

Each request is read whole, held for --delay-ms, forwarded unchanged (method, path, headers,
body; s3rver checks no signature, and the Host header is passed through) over a kept-alive
connection per thread, and the answer is relayed. Counts: GET /__delay/status (loopback only)
answers {"requests": N, "by_method": {"GET": N, ...}, "bytes_out": N}; POST /__delay/reset zeroes
them.

    delay_proxy.py --port P --upstream http://127.0.0.1:U --delay-ms 20
"""
import argparse
import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
       "transfer-encoding", "upgrade"}

args = None
local = threading.local()
lock = threading.Lock()
stats = {"requests": 0, "by_method": {}, "bytes_out": 0}


def read_body(h):
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(h.rfile.readline().split(b";")[0], 16)
            if size == 0:
                h.rfile.readline()
                return out
            out += h.rfile.read(size)
            h.rfile.readline()
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self):
        if self.path == "/__delay/status" and self.command == "GET":
            with lock:
                body = json.dumps(stats).encode()
            self.answer(200, body, [("Content-Type", "application/json")])
        elif self.path == "/__delay/reset" and self.command == "POST":
            with lock:
                stats.update({"requests": 0, "by_method": {}, "bytes_out": 0})
            self.answer(200, b"{}", [("Content-Type", "application/json")])
        else:
            self.answer(404, b"")

    def handle_any(self):
        body = read_body(self)
        if self.path.startswith("/__delay/"):
            return self.control()
        time.sleep(args.delay_ms / 1000.0)
        fwd = {k: v for k, v in self.headers.items()
               if k.lower() not in HOP and k.lower() not in ("content-length", "expect")}
        fwd["Content-Length"] = str(len(body))
        for attempt in range(2):
            try:
                c = getattr(local, "conn", None)
                if c is None:
                    u = urlsplit(args.upstream)
                    c = local.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
                c.request(self.command, self.path, body=body, headers=fwd)
                r = c.getresponse()
                data = r.read()
                break
            except (http.client.HTTPException, OSError):
                local.conn = None
                if attempt:
                    self.answer(502, b"upstream unreachable")
                    return
        with lock:
            stats["requests"] += 1
            stats["by_method"][self.command] = stats["by_method"].get(self.command, 0) + 1
            stats["bytes_out"] += len(data)
        hdrs = [(k, v) for k, v in r.getheaders()
                if k.lower() not in HOP and k.lower() != "content-length"]
        if self.command == "HEAD":
            self.send_response(r.status)
            for k, v in hdrs:
                self.send_header(k, v)
            self.send_header("Content-Length", r.getheader("Content-Length") or "0")
            self.end_headers()
            return
        self.answer(r.status, data, hdrs)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--delay-ms", type=float, default=20.0)
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    print("delay_proxy listening on 127.0.0.1:%d (+%g ms per request)" % (args.port, args.delay_ms),
          flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
