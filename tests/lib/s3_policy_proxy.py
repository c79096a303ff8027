#!/usr/bin/python3
"""An S3 endpoint for tests that enforces per-credential permissions the way an S3 bucket policy
does, in front of s3rver (which accepts any key and has no permissions at all).

Every request's AWS Signature V4 is checked with botocore (the `verify` of sigv4_verify.py, beside
this file); then the request is classified into one operation and allowed or refused by the
policy of the role its access key belongs to:

    clickhouse  GET HEAD LIST PUT ABORT        (read, create, list; never delete)
    uploader    PUT ABORT                      (create only)
    janitor     DELETE LIST HEAD BUCKETCONF    (delete, and what it needs to find what to delete)

Operations: GET (GetObject), HEAD (HeadObject/HeadBucket), LIST (ListObjects[V2], ListParts,
ListMultipartUploads), PUT (PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
CopyObject), ABORT (AbortMultipartUpload), DELETE (DeleteObject, and DeleteObjects: POST ?delete),
BUCKETCONF (GET/PUT of ?versioning, ?policy, ?lifecycle, ...), ADMIN (CreateBucket, DeleteBucket;
nobody). A refused request gets 403 AccessDenied in S3's XML, like S3 itself.

Like sigv4_verify.py, it adds encoding-type=url listings and If-None-Match: * on PUT and
CompleteMultipartUpload, which s3rver lacks (see there).

Counts: GET /__policy/status (no auth; loopback only) answers JSON
    {"counts": {"<role>": {"<OP>": {"allowed": N, "denied": N, "failed": N}}},
     "methods": {"<role>": {"<HTTP METHOD>": N}}, "requests": N}
"allowed" means forwarded and answered 2xx by the upstream, "failed" forwarded but answered
otherwise, "denied" refused by the policy; "methods" counts every request a role sent by its HTTP
method (GET, HEAD, PUT, POST, DELETE), whatever became of it. POST /__policy/reset zeroes the
counts. Every request is also logged to --log: "ALLOW|DENY|REJECT ROLE OP METHOD PATH?QUERY
[STATUS]".

    s3_policy_proxy.py --port P --upstream http://127.0.0.1:U --keys FILE --log FILE
                       [--upstream-key S3RVER] [--region us-east-1] [--role ROLE=OP,OP...]...
FILE holds "ACCESS_KEY_ID SECRET ROLE" lines. --role replaces a role's operations, e.g.
--role clickhouse=GET,HEAD,LIST for a ClickHouse credential that may only read and list
([cluster] clickhouse_object_access = read-only).
"""
import json
import os
import re
import sys
import threading
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigv4_verify  # noqa: E402  (reused: the botocore signature check)
from http_proxy import ProxyHandler, read_body, serve  # noqa: E402  (the shared scaffolding)

POLICY = {
    "clickhouse": {"GET", "HEAD", "LIST", "PUT", "ABORT"},
    "uploader": {"PUT", "ABORT"},
    "janitor": {"DELETE", "LIST", "HEAD", "BUCKETCONF"},
}
BUCKET_SUBRESOURCES = {"versioning", "policy", "lifecycle", "acl", "cors", "location", "tagging",
                       "website", "logging", "notification", "encryption", "replication",
                       "object-lock", "ownershipControls", "publicAccessBlock"}

args = None
roles = {}  # access key -> role
counts = {}
methods = {}
counts_lock = threading.Lock()


def count(role, op, outcome):
    with counts_lock:
        counts.setdefault(role, {}).setdefault(op, {"allowed": 0, "denied": 0, "failed": 0})
        counts[role][op][outcome] += 1


def count_method(role, method):
    with counts_lock:
        m = methods.setdefault(role, {})
        m[method] = m.get(method, 0) + 1


def classify(method, path, query):
    """The S3 operation a request performs (path is /bucket[/key], query a dict)."""
    parts = path.lstrip("/").split("/", 1)
    has_key = len(parts) == 2 and parts[1] != ""
    sub = set(query) & BUCKET_SUBRESOURCES
    if sub and not has_key:
        return "BUCKETCONF"
    if method == "POST" and "delete" in query:
        return "DELETE"
    if method == "DELETE":
        if has_key and "uploadId" in query:
            return "ABORT"
        return "DELETE" if has_key else "ADMIN"
    if method in ("GET",):
        if not has_key or "uploadId" in query or "uploads" in query:
            return "LIST"
        return "GET"
    if method == "HEAD":
        return "HEAD"
    if method == "PUT":
        return "PUT" if has_key else "ADMIN"
    if method == "POST":
        return "PUT" if has_key else "ADMIN"
    return "ADMIN"


def error_xml(code, message):
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s"
            "</Message></Error>" % (code, message)).encode()


class Handler(ProxyHandler):
    head_headers = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}

    def control(self):
        if self.path == "/__policy/status" and self.command == "GET":
            with counts_lock:
                body = json.dumps({"counts": counts, "methods": methods,
                                   "requests": sum(v for r in counts.values()
                                                   for o in r.values() for v in o.values())})
            self.answer(200, body.encode(), [("Content-Type", "application/json")])
        elif self.path == "/__policy/reset" and self.command == "POST":
            with counts_lock:
                counts.clear()
                methods.clear()
            self.answer(200, b"{}", [("Content-Type", "application/json")])
        else:
            self.answer(404, b"")

    def handle_any(self):
        if self.path.startswith("/__policy/"):
            read_body(self)
            return self.control()
        body = read_body(self)
        host = self.headers.get("Host", "")
        why = sigv4_verify.verify(self.command, host, self.path, self.headers, body)
        u = urlsplit(self.path)
        path = u.path
        hostname = host.split(":")[0]
        if hostname.endswith(".localhost"):  # virtual-host style: forward path-style
            path = "/" + hostname[: -len(".localhost")] + path
        query = dict(parse_qsl(u.query, keep_blank_values=True))
        op = classify(self.command, path, query)
        m = sigv4_verify.AUTH_RE.match(self.headers.get("Authorization", ""))
        role = roles.get(m.group(1), "unknown") if m else "anonymous"
        count_method(role, self.command)
        if why:
            code, reason = why
            sigv4_verify.log("REJECT %s %s %s %s %s" % (role, op, self.command, self.path, reason))
            count(role, op, "denied")
            self.answer(403 if code != "InvalidRequest" else 400,
                        error_xml(code, reason + " (checked by botocore)"),
                        [("Content-Type", "application/xml")])
            return
        if op not in POLICY.get(role, set()):
            sigv4_verify.log("DENY %s %s %s %s" % (role, op, self.command, self.path))
            count(role, op, "denied")
            self.answer(403, error_xml("AccessDenied", "Access Denied (role %s may not %s)"
                                       % (role, op)), [("Content-Type", "application/xml")])
            return
        fwd = self.forward_headers(drop={"host", "authorization"})
        fwd["Authorization"] = re.sub(r"Credential=[^/]+/", "Credential=%s/" % args.upstream_key,
                                      self.headers.get("Authorization"))
        fwd["Content-Length"] = str(len(body))
        fwd_path = path + ("?" + u.query if u.query else "")
        pf = sigv4_verify.precondition_failed(self.command, fwd_path, self.headers,
                                              self.head_upstream)
        if pf:
            count(role, op, "failed")
            sigv4_verify.log("ALLOW %s %s %s %s 412" % (role, op, self.command, self.path))
            self.answer(412, pf, [("Content-Type", "application/xml")])
            return
        got = self.forward(fwd_path, body, fwd)
        if got is None:
            count(role, op, "failed")
            self.answer(502, error_xml("BadGateway", "upstream unreachable"))
            return
        r, data = got
        ok = 200 <= r.status < 300
        count(role, op, "allowed" if ok else "failed")
        sigv4_verify.log("ALLOW %s %s %s %s %d" % (role, op, self.command, self.path, r.status))
        self.relay(r, sigv4_verify.url_encode_listing(self.command, fwd_path, data))


def main():
    global args
    p = sigv4_verify.s3_proxy_arguments()
    p.add_argument("--role", action="append", default=[],
                   help="ROLE=OP,OP...: the operations ROLE may do (replaces its policy)")
    args = p.parse_args()
    for spec in args.role:
        role, _, ops = spec.partition("=")
        known = {"GET", "HEAD", "LIST", "PUT", "ABORT", "DELETE", "BUCKETCONF", "ADMIN"}
        want = {o for o in ops.split(",") if o}
        if role not in POLICY or not want <= known:
            sys.exit("--role %s: expected ROLE=OP,OP... with a role of %s and operations of %s"
                     % (spec, sorted(POLICY), sorted(known)))
        POLICY[role] = want
    sigv4_verify.args = args
    with open(args.keys) as f:
        for line in f:
            if line.strip():
                k, s, role = line.split()
                if role not in POLICY:
                    sys.exit("unknown role %s in %s" % (role, args.keys))
                sigv4_verify.keys[k] = s
                roles[k] = role
    serve(Handler, args.port, args.upstream, "s3_policy_proxy listening on 127.0.0.1:%d" % args.port)


if __name__ == "__main__":
    sys.exit(main())
