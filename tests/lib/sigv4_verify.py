#!/usr/bin/python3
"""An S3 endpoint that checks every request's AWS Signature V4 with botocore (an independent
signer), answers 403 SignatureDoesNotMatch on a mismatch, and forwards good requests to an
upstream S3 server (s3rver), path-style, with the upstream's access key. One line per request is
appended to --log: "OK METHOD PATH?QUERY" or "REJECT METHOD PATH?QUERY reason".

    sigv4_verify.py --port P --upstream http://127.0.0.1:U --keys FILE --log FILE
                    [--upstream-key S3RVER] [--region us-east-1]
FILE holds "ACCESS_KEY_ID SECRET" lines. Virtual-host requests (Host: BUCKET.localhost:P) are
verified as sent and forwarded as /BUCKET/KEY.

Two S3 behaviours s3rver 3.7.1 lacks are added here (and by s3_policy_proxy.py, which uses the
same functions), as S3 documents them:
  - ListObjectsV2 with encoding-type=url: s3rver ignores the parameter and sends keys raw (a
    control character then makes the XML invalid); the answer's Key, Prefix, StartAfter and
    Delimiter are form-encoded (space as '+') and <EncodingType>url</EncodingType> is added
  - If-None-Match: * on PutObject and CompleteMultipartUpload: s3rver overwrites; here the key
    is looked up first and an existing one answers 412 PreconditionFailed
"""
import argparse
import hashlib
import os
import re
import sys
import threading
from urllib.parse import parse_qsl, quote_plus, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_proxy import HOP, ProxyHandler, read_body, serve  # noqa: E402,F401  (HOP: s3_policy_proxy)

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
                     r"\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$")

args = None
keys = {}
log_lock = threading.Lock()


def log(line):
    with log_lock:
        with open(args.log, "a") as f:
            f.write(line + "\n")


_LIST_FIELDS = re.compile(rb"<(Key|Prefix|StartAfter|Delimiter)>(.*?)</\1>", re.S)
_XML_REF = re.compile(r"&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);")
_XML_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _xml_unescape(text):
    """XML's five entities and numeric character references (s3rver writes '`' as &#x60;)."""
    def one(m):
        r = m.group(1)
        if r.startswith("#x"):
            return chr(int(r[2:], 16))
        if r.startswith("#"):
            return chr(int(r[1:]))
        return _XML_NAMED[r]
    return _XML_REF.sub(one, text)


def url_encode_listing(method, path_qs, data):
    """A ListObjectsV2 answer as S3 sends it for encoding-type=url (see the module's text)."""
    u = urlsplit(path_qs)
    q = dict(parse_qsl(u.query, keep_blank_values=True))
    if (method != "GET" or q.get("encoding-type") != "url" or b"<ListBucketResult" not in data
            or b"<EncodingType>" in data):
        return data

    def enc(m):
        raw = _xml_unescape(m.group(2).decode("utf-8", "surrogateescape"))
        return b"<%s>%s</%s>" % (m.group(1), quote_plus(raw.encode("utf-8", "surrogateescape"),
                                                         safe="/").encode(), m.group(1))
    data = _LIST_FIELDS.sub(enc, data)
    return data.replace(b"</ListBucketResult>", b"<EncodingType>url</EncodingType></ListBucketResult>")


def precondition_failed(method, path_qs, headers, head_upstream):
    """The 412 answer S3 gives a PUT or a CompleteMultipartUpload with If-None-Match: * whose
    key exists (None when the request may go on). head_upstream(path) -> HTTP status."""
    if headers.get("If-None-Match", "").strip() != "*":
        return None
    u = urlsplit(path_qs)
    q = dict(parse_qsl(u.query, keep_blank_values=True))
    is_put = method == "PUT" and "partNumber" not in q and "uploadId" not in q
    is_complete = method == "POST" and "uploadId" in q
    if not (is_put or is_complete) or head_upstream(u.path) != 200:
        return None
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>PreconditionFailed</Code>"
            "<Message>At least one of the pre-conditions you specified did not hold</Message>"
            "<Condition>If-None-Match</Condition></Error>").encode()


def verify(method, host, raw_path, headers, body):
    """Returns None when the signature is right, else a reason."""
    auth = headers.get("Authorization")
    if not auth:
        return "AccessDenied", "no Authorization header"
    m = AUTH_RE.match(auth)
    if not m:
        return "AuthorizationHeaderMalformed", "malformed Authorization header"
    akid, date, region, service, signed, signature = m.groups()
    if akid not in keys:
        return "InvalidAccessKeyId", "unknown access key " + akid
    if region != args.region or service != "s3":
        return "AuthorizationHeaderMalformed", "wrong scope %s/%s" % (region, service)
    amz_date = headers.get("x-amz-date", "")
    if not amz_date.startswith(date):
        return "AuthorizationHeaderMalformed", "x-amz-date does not match the credential date"
    sha = headers.get("x-amz-content-sha256")
    if sha is None:
        return "InvalidRequest", "missing x-amz-content-sha256"
    if sha != "UNSIGNED-PAYLOAD" and sha != hashlib.sha256(body).hexdigest():
        return "XAmzContentSHA256Mismatch", "x-amz-content-sha256 is not the body's hash"
    names = signed.split(";")
    for required in ("host", "x-amz-date", "x-amz-content-sha256"):
        if required not in names:
            return "AccessDenied", required + " is not signed"
    to_sign = {}
    for n in names:
        v = headers.get(n)
        if v is None:
            return "AccessDenied", "signed header %s is missing" % n
        to_sign[n] = v
    req = AWSRequest(method=method, url="http://%s%s" % (host, raw_path), headers=to_sign,
                     data=body)
    req.context["timestamp"] = amz_date
    signer = S3SigV4Auth(Credentials(akid, keys[akid]), "s3", region)
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    if expected != signature:
        return "SignatureDoesNotMatch", "signature mismatch"
    return None


class Handler(ProxyHandler):
    head_headers = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}

    def handle_any(self):
        body = read_body(self)
        host = self.headers.get("Host", "")
        why = verify(self.command, host, self.path, self.headers, body)
        if why:
            code, reason = why
            log("REJECT %s %s %s" % (self.command, self.path, reason))
            xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                   "<Message>%s (checked by botocore)</Message></Error>" % (code, reason))
            self.answer(403 if code != "InvalidRequest" else 400, xml.encode(),
                        [("Content-Type", "application/xml")])
            return
        log("OK %s %s" % (self.command, self.path))
        path = self.path
        hostname = host.split(":")[0]
        if hostname.endswith(".localhost"):  # virtual-host style: forward path-style
            path = "/" + hostname[: -len(".localhost")] + path
        fwd = self.forward_headers(drop={"host"})
        fwd["Authorization"] = re.sub(r"Credential=[^/]+/", "Credential=%s/" % args.upstream_key,
                                      fwd["Authorization"])
        fwd["Content-Length"] = str(len(body))
        pf = precondition_failed(self.command, path, self.headers, self.head_upstream)
        if pf:
            log("PRECONDITION %s %s" % (self.command, self.path))
            self.answer(412, pf, [("Content-Type", "application/xml")])
            return
        got = self.forward(path, body, fwd)
        if got is None:
            self.answer(502, b"upstream unreachable")
            return
        r, data = got
        self.relay(r, url_encode_listing(self.command, path, data))


def s3_proxy_arguments():
    """The options of the S3 proxies (this one and s3_policy_proxy.py)."""
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--keys", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--upstream-key", default="S3RVER")
    p.add_argument("--region", default="us-east-1")
    return p


def main():
    global args
    args = s3_proxy_arguments().parse_args()
    with open(args.keys) as f:
        for line in f:
            if line.strip():
                k, s = line.split()
                keys[k] = s
    serve(Handler, args.port, args.upstream, "sigv4_verify listening on 127.0.0.1:%d" % args.port)


if __name__ == "__main__":
    sys.exit(main())
