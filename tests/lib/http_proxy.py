"""The scaffolding ferry's HTTP proxies share (bench/delay_proxy.py; tests/lib/sigv4_verify.py,
s3_policy_proxy.py and agent_v1_proxy.py): a threaded HTTP/1.1 server on loopback whose handler
reads each request whole (Content-Length or chunked), forwards it to the upstream over one
kept-alive connection per thread (a broken connection is reopened once), and relays the answer
without hop-by-hop headers. A proxy subclasses ProxyHandler and writes handle_any; serve() sets
the upstream.
"""
import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "trailers", "transfer-encoding", "upgrade"}

_local = threading.local()


def read_body(handler):
    """The request body, also when sent with chunked transfer encoding."""
    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                while handler.rfile.readline().strip():  # trailers
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else b""


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream_url = None  # http://host:port, set before serving
    upstream_timeout = 120
    head_headers = {}  # the headers of head_upstream's requests

    def setup(self):
        super().setup()
        # An answer is written as two sends (the headers at end_headers, then the body): with
        # Nagle's algorithm on, the body waited for the client's delayed ACK of the headers,
        # about 40 ms per answer on Linux loopback (measured: 44 ms per GET through the proxy,
        # 0.3 ms with this), which made every S3 request of the tests and the soak that slow.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *a):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def forward_headers(self, drop=()):
        """The request's headers minus hop-by-hop ones, Content-Length, Expect and drop
        (lower-case names); the caller sets Content-Length for the body it sends."""
        skip = HOP | {"content-length", "expect"} | set(drop)
        return {k: v for k, v in self.headers.items() if k.lower() not in skip}

    def forward(self, path, body, headers):
        """Sends the request upstream; returns (response, its body), or None when the upstream
        cannot be reached twice in a row."""
        for _ in range(2):
            try:
                c = getattr(_local, "conn", None)
                if c is None:
                    u = urlsplit(self.upstream_url)
                    c = _local.conn = http.client.HTTPConnection(u.hostname, u.port,
                                                                 timeout=self.upstream_timeout)
                c.request(self.command, path, body=body, headers=headers)
                r = c.getresponse()
                return r, r.read()
            except (http.client.HTTPException, OSError):
                _local.conn = None
        return None

    def relay(self, r, body):
        """Answers with the upstream's status and headers (hop-by-hop ones dropped) and body; a
        HEAD answer keeps the upstream's Content-Length."""
        hdrs = [(k, v) for k, v in r.getheaders()
                if k.lower() not in HOP and k.lower() != "content-length"]
        if self.command != "HEAD":
            return self.answer(r.status, body, hdrs)
        self.send_response(r.status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", r.getheader("Content-Length") or "0")
        self.end_headers()

    def head_upstream(self, path):
        """The status of a HEAD of path upstream, on a connection of its own."""
        u = urlsplit(self.upstream_url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            c.request("HEAD", path, headers=self.head_headers)
            return c.getresponse().status
        finally:
            c.close()

    def handle_any(self):
        raise NotImplementedError

    def do_GET(self):
        self.handle_any()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET


def serve(handler, port, upstream, banner):
    """Serves handler (a ProxyHandler subclass) on 127.0.0.1:port, forwarding to upstream, until
    killed; prints banner once listening."""
    handler.upstream_url = upstream
    srv = ThreadingHTTPServer(("127.0.0.1", port), handler)
    srv.daemon_threads = True
    print(banner, flush=True)
    srv.serve_forever()
