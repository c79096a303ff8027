# A stand-in for behaviours of ClickHouse's HTTP interface that Debian's 18.16 server cannot
# show: the 25.11+ tagged in-band exception framing (X-ClickHouse-Exception-Tag), split across
# chunks at awkward places, and a server that drops a connection before answering. Used by
# tests/integration/chclient_framing.sh; the real-server checks live in chclient_server.sh.
# usage: fake_ch_http.py PORT
import http.server
import sys
import urllib.parse

TAG = "k3j5a9x0qpz7mw2e"
seen = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def send_chunks(self, chunks, headers):
        self.send_response(200)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for c in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def do_POST(self):
        params = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        body = self.read_body()
        sql = params.get("query", [body.decode(errors="replace")])[0]
        seen[sql] = seen.get(sql, 0) + 1
        if "dropfirst" in sql and seen[sql] == 1:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if "tagged_error" in sql:
            self.send_chunks([b"1\n2\n", b"3\n\r\n__exc", b"eption__\r\n" + TAG[:5].encode(),
                              TAG[5:].encode() + b"\r\nCode: 395. DB::Exception: boom. "
                              b"(FUNCTION_THROW_IF_VALUE_IS_NON_ZERO) (version 25.11.1.1)\r\n",
                              b"87 " + TAG.encode() + b"\r\n__exception__\r\n"],
                             [("X-ClickHouse-Exception-Tag", TAG)])
            return
        if "tagged_ok" in sql:
            # "Code:" lines are plain data when the server tags its exceptions
            self.send_chunks([b"1\n", b"Code: 1. DB::Exception: not an error, data\n"],
                             [("X-ClickHouse-Exception-Tag", TAG)])
            return
        self.send_chunks([b"ok %d\n" % seen[sql]], [])


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.serve_forever()
