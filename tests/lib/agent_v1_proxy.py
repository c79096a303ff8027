#!/usr/bin/python3
"""A node agent of API version 1 for tests: forwards every request to a current agent, except
that it answers what an agent of version 1 answered.

- the many-part forms of version 2 are refused with 400 and the message version 1 gave (a
  required field missing): freeze with "partitions", upload and write-pointers with "parts",
  remove-freeze with "names", remove-detached with "parts"; and send with "live" (version 3);
- upload answers lose what version 1 did not report: "verified", "rows", "freeze" and each
  object's "file_hash" and "sha256";
- status says "api": 1.

Counts: GET /__v1/status (no auth) answers {"refused": N, "forwarded": N, "refused_by_op":
{op: N}}.

    agent_v1_proxy.py --port P --upstream http://127.0.0.1:U
"""
import argparse
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_proxy import ProxyHandler, read_body, serve  # noqa: E402  (the shared scaffolding)

NEW_FORMS = {
    "freeze": ("partitions", "name"),
    "upload": ("parts", "freeze"),
    "write-pointers": ("parts", "part"),
    "remove-freeze": ("names", "name"),
    "remove-detached": ("parts", "part"),
    "send": ("live", "freeze"),
}
COUNTS = {"refused": 0, "forwarded": 0, "refused_by_op": {}}
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
        if isinstance(req, dict) and op in NEW_FORMS and NEW_FORMS[op][0] in req:
            with LOCK:
                COUNTS["refused"] += 1
                COUNTS["refused_by_op"][op] = COUNTS["refused_by_op"].get(op, 0) + 1
            field = NEW_FORMS[op][1]
            return self.reply(400, {"error": '"%s" (a non-empty string) is required' % field,
                                    "code": "invalid input", "status": 400})
        headers = self.forward_headers(drop={"host"})
        headers["Content-Length"] = str(len(body))
        got = self.forward(self.path, body, headers)
        if got is None:
            return self.answer(502, b"upstream unreachable")
        resp, data = got
        with LOCK:
            COUNTS["forwarded"] += 1
        if resp.status == 200 and op in ("upload", "status"):
            answer = json.loads(data)
            if op == "upload":
                strip_upload(answer)
            else:
                answer["api"] = 1
            return self.reply(200, answer)
        self.relay(resp, data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    a = ap.parse_args()
    serve(Handler, a.port, a.upstream, "listening on %d" % a.port)


if __name__ == "__main__":
    main()
