#!/usr/bin/python3
"""A node agent of an older API version for tests (1 by default, --api N): forwards every
request to a current agent, except that it answers what an agent of that version answered.

- below 2, the many-part forms are refused with 400 and the message version 1 gave (a required
  field missing): freeze with "partitions", upload and write-pointers with "parts",
  remove-freeze with "names", remove-detached with "parts"; below 3, send with "live"; below 5,
  send with "parts" and a receive of a batch ("batch=1");
- below 2, upload answers lose what version 1 did not report: "verified", "rows", "freeze" and
  each object's "file_hash" and "sha256";
- status says "api": N.

Counts: GET /__v1/status (no auth) answers {"refused": N, "forwarded": N, "refused_by_op":
{op: N}, "forwarded_by_op": {op: N}}.

    agent_v1_proxy.py --port P --upstream http://127.0.0.1:U [--api N]
"""
import argparse
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_proxy import ProxyHandler, read_body, serve  # noqa: E402  (the shared scaffolding)

# (op, the field of the newer form, the field the older version required, the version it came in)
NEW_FORMS = [
    ("freeze", "partitions", "name", 2),
    ("upload", "parts", "freeze", 2),
    ("write-pointers", "parts", "part", 2),
    ("remove-freeze", "names", "name", 2),
    ("remove-detached", "parts", "part", 2),
    ("send", "live", "freeze", 3),
    ("send", "parts", "part", 5),
]
API = 1
COUNTS = {"refused": 0, "forwarded": 0, "refused_by_op": {}, "forwarded_by_op": {}}
LOCK = threading.Lock()


def strip_upload(answer):
    for k in ("verified", "rows", "freeze"):
        answer.pop(k, None)
    for o in answer.get("objects", []):
        o.pop("file_hash", None)
        o.pop("sha256", None)
    return answer


class Handler(ProxyHandler):
    upstream_timeout = 600

    def reply(self, status, body):
        self.answer(status, json.dumps(body).encode(), [("Content-Type", "application/json")])

    def handle_any(self):
        if self.path == "/__v1/status":
            with LOCK:
                return self.reply(200, dict(COUNTS))
        body = read_body(self)
        op = self.path.split("?")[0].rsplit("/", 1)[-1]
        req = None
        if body and self.headers.get("Content-Type", "").startswith("application/json"):
            try:
                req = json.loads(body)
            except ValueError:
                req = None
        refusal = None
        for name, newer, older, since in NEW_FORMS:
            if API < since and isinstance(req, dict) and op == name and newer in req:
                refusal = '"%s" (a non-empty string) is required' % older
                break
        if API < 5 and op == "receive" and "batch=1" in self.path:
            refusal = "receive needs the arguments database, table, part and kind"
        if refusal:
            with LOCK:
                COUNTS["refused"] += 1
                COUNTS["refused_by_op"][op] = COUNTS["refused_by_op"].get(op, 0) + 1
            return self.reply(400, {"error": refusal, "code": "invalid input", "status": 400})
        headers = self.forward_headers(drop={"host"})
        headers["Content-Length"] = str(len(body))
        got = self.forward(self.path, body, headers)
        if got is None:
            return self.answer(502, b"upstream unreachable")
        resp, data = got
        with LOCK:
            COUNTS["forwarded"] += 1
            COUNTS["forwarded_by_op"][op] = COUNTS["forwarded_by_op"].get(op, 0) + 1
        if resp.status == 200 and ((op == "upload" and API < 2) or op == "status"):
            answer = json.loads(data)
            if op == "upload":
                strip_upload(answer)
            else:
                answer["api"] = API
            return self.reply(200, answer)
        self.relay(resp, data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--api", type=int, default=1)
    a = ap.parse_args()
    global API
    API = a.api
    serve(Handler, a.port, a.upstream, "listening on %d" % a.port)


if __name__ == "__main__":
    main()
