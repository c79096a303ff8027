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
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from http_proxy import ProxyHandler, read_body, serve  # noqa: E402  (the shared scaffolding)

args = None
lock = threading.Lock()
stats = {"requests": 0, "by_method": {}, "bytes_out": 0}


class Handler(ProxyHandler):
    upstream_timeout = 300

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
        fwd = self.forward_headers()
        fwd["Content-Length"] = str(len(body))
        got = self.forward(self.path, body, fwd)
        if got is None:
            return self.answer(502, b"upstream unreachable")
        r, data = got
        with lock:
            stats["requests"] += 1
            stats["by_method"][self.command] = stats["by_method"].get(self.command, 0) + 1
            stats["bytes_out"] += len(data)
        self.relay(r, data)


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--delay-ms", type=float, default=20.0)
    args = p.parse_args()
    serve(Handler, args.port, args.upstream,
          "delay_proxy listening on 127.0.0.1:%d (+%g ms per request)" % (args.port, args.delay_ms))


if __name__ == "__main__":
    main()
