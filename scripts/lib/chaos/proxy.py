"""A proxy that lies: registered as the provider's base URL, it passes every call through
(streaming bodies, keeping status and headers) except while a phase makes it answer an
ingress's HTML 404 or 502 page to every call; while the provider is down it stops listening,
so the service meets a refused connection as it would without it."""

import collections
import http.client
import http.server
import re
import socket
import struct
import threading
import time

from procs import free_port

HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
       "content-length", "host"}
PAGES = {
    404: ("Not Found", b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
                      b"<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"),
    502: ("Bad Gateway", b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                         b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"),
}
SANDBOX = re.compile(r"/v3/sandboxes/(sbx_[0-9A-Za-z]+)")


def reset(sock):
    """Closes with an RST, as a proxy whose upstream vanished mid-call does."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy = None

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        self.proxy.opened(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.proxy.closed(self.connection)

    def body(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else None

    def relay(self):
        data = self.body()
        status = self.proxy.lie_for(self.command, self.path)
        if status:
            reason, page = PAGES[status]
            self.send_response_only(status, reason)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        up = http.client.HTTPConnection("127.0.0.1", self.proxy.upstream_port, timeout=900)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        try:
            up.request(self.command, self.path, body=data, headers=headers)
            res = up.getresponse()
            self.answer(res)
        except (OSError, http.client.HTTPException):
            self.close_connection = True
            self.proxy.count("upstream_cut")
            reset(self.connection)
        finally:
            up.close()

    def answer(self, res):
        self.send_response_only(res.status, res.reason)
        for k, v in res.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        length = res.getheader("content-length")
        bodyless = self.command == "HEAD" or res.status in (204, 304) or 100 <= res.status < 200
        if length is not None:
            self.send_header("content-length", length)
        elif not bodyless:
            self.send_header("transfer-encoding", "chunked")
        if (res.getheader("connection") or "").lower() == "close":
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        if bodyless:
            return
        while True:
            chunk = res.read1(65536) if length is None else res.read(65536)
            if not chunk:
                break
            self.wfile.write(chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if length is None:
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = relay


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        """A client that cut its connection (a replica killed, a call timed out) is no error."""


class LyingProxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.mode = None
        self.counts = collections.Counter()
        self.lied_about = {}
        self.conns = set()
        self.server = None
        self.thread = None

    def start(self):
        handler = type("BoundHandler", (Handler,), {"proxy": self})
        for _ in range(100):
            try:
                self.server = Server(("127.0.0.1", self.port), handler)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise OSError(f"the proxy could not listen on {self.port} again")
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                       name="lying-proxy", daemon=True)
        self.thread.start()

    def refuse(self):
        """Stops listening and cuts every open connection: the provider is down."""
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        self.server = None
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            reset(c)

    def accept(self):
        if self.server is None:
            self.start()

    def stop(self):
        self.refuse()

    def lie(self, status):
        with self.lock:
            self.mode = status

    def opened(self, conn):
        with self.lock:
            self.conns.add(conn)

    def closed(self, conn):
        with self.lock:
            self.conns.discard(conn)

    def count(self, what):
        with self.lock:
            self.counts[what] += 1

    def lie_for(self, method, path):
        with self.lock:
            status = self.mode
            if status is None:
                self.counts["passed"] += 1
                return None
            kind = re.sub(r"sbx_[0-9A-Za-z]+", "{id}", path.split("?")[0])
            self.counts[f"html_{status} {method} {kind}"] += 1
            m = SANDBOX.search(path)
            if m:
                self.lied_about.setdefault(m.group(1), []).append((round(time.monotonic(), 3), status, method, kind))
            return status
