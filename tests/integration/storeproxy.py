"""A fault-injecting HTTP proxy for the fragment store: it sits between a
broker and the S3 server (SeaweedFS), forwards every request unchanged
(Host included, so SigV4 signatures made for the proxy's address verify),
and on command stalls fragment uploads.

`stall_puts(n, after)`: the next `n` PUTs of a fragment (not the store
health check's `.test/` objects) are read for `after` bytes of their body
(at most half of it), and then the proxy stops reading them, without
answering or closing, until `release()` (close() calls it) or `hold_s`
passes. That is a server
that accepted an upload and then hung mid-body: the client sees its send
window close and nothing ever come back.

Standard library only; one thread per connection."""
import http.client
import http.server
import threading
import time


class StoreProxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target, hold_s=120):
        self.target = target.replace("http://", "")
        self.hold_s = hold_s
        self.mu = threading.Lock()
        self._stall_left, self._stall_after = 0, 0
        self.stalled = []   # (path, body bytes read, monotonic time it stopped reading) per stalled PUT
        self.puts = []      # (path, status, monotonic time) of every fragment PUT forwarded
        self._release = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def stall_puts(self, n=1, after=64 * 1024):
        with self.mu:
            self._stall_left, self._stall_after = n, after
        self._release.clear()

    def release(self):
        self._release.set()

    def close(self):
        self.release()
        self.shutdown()
        self.server_close()

    def _take_stall(self):
        with self.mu:
            if self._stall_left <= 0:
                return None
            self._stall_left -= 1
            return self._stall_after


def fragment_put(command, path):
    return command == "PUT" and "/.test/" not in path and ".gazette-delete-probe" not in path


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def stall(self, n, after):
        """Reads `after` bytes of the body, then stops reading until
        release() or hold_s, and drops the connection without an answer.
        (The client's own close is not watched for: with its body unread
        ahead of the FIN, the socket never reads as closed.)"""
        got = len(self.rfile.read(min(after, n // 2)))
        with self.server.mu:
            self.server.stalled.append((self.path.split("?")[0], got, time.monotonic()))
        self.server._release.wait(self.server.hold_s)
        self.close_connection = True

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        path = self.path.split("?")[0]
        if fragment_put(self.command, path) and n > 1:
            after = self.server._take_stall()
            if after is not None:
                return self.stall(n, after)
        body = self.rfile.read(n) if n else None
        conn = http.client.HTTPConnection(self.server.target, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if fragment_put(self.command, path):
            with self.server.mu:
                self.server.puts.append((path, resp.status, time.monotonic()))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward
