#!/usr/bin/python3
"""A node agent of API version 1 for tests: forwards every request to a current agent, except
that it answers what an agent of version 1 answered.

- the many-part forms of version 2 are refused with 400 and the message version 1 gave (a
  required field missing): freeze with "partitions", upload and write-pointers with "parts",
  remove-freeze with "names", remove-detached with "parts";
- upload answers lose what version 1 did not report: "verified", "rows", "freeze" and each
  object's "file_hash" and "sha256";
- status says "api": 1.

Counts: GET /__v1/status (no auth) answers {"refused": N, "forwarded": N}.

    agent_v1_proxy.py --port P --upstream http://127.0.0.1:U
"""
import argparse
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

NEW_FORMS = {
    "freeze": ("partitions", "name"),
    "upload": ("parts", "freeze"),
    "write-pointers": ("parts", "part"),
    "remove-freeze": ("names", "name"),
    "remove-detached": ("parts", "part"),
}
COUNTS = {"refused": 0, "forwarded": 0}
LOCK = threading.Lock()


def strip_upload(answer):
    for k in ("verified", "rows", "freeze"):
        answer.pop(k, None)
    for o in answer.get("objects", []):
        o.pop("file_hash", None)
        o.pop("sha256", None)
    return answer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def forward(self, method):
        if self.path == "/__v1/status":
            with LOCK:
                return self.reply(200, dict(COUNTS))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        op = self.path.split("?")[0].rsplit("/", 1)[-1]
        req = None
        if body and self.headers.get("Content-Type", "").startswith("application/json"):
            try:
                req = json.loads(body)
            except ValueError:
                req = None
        if isinstance(req, dict) and op in NEW_FORMS and NEW_FORMS[op][0] in req:
            with LOCK:
                COUNTS["refused"] += 1
            field = NEW_FORMS[op][1]
            return self.reply(400, {"error": '"%s" (a non-empty string) is required' % field,
                                    "code": "invalid input", "status": 400})
        up = urlsplit(self.server.upstream)
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=600)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        conn.request(method, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        with LOCK:
            COUNTS["forwarded"] += 1
        if resp.status == 200 and op in ("upload", "status"):
            answer = json.loads(data)
            if op == "upload":
                strip_upload(answer)
            else:
                answer["api"] = 1
            return self.reply(200, answer)
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    def do_GET(self):
        self.forward("GET")

    def do_POST(self):
        self.forward("POST")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.upstream = a.upstream
    print("listening on %d" % a.port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
