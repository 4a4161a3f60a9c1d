"""Loopback TCP proxies for the tests. TcpProxy can be cut: `block()`
drops every connection and refuses new ones until `unblock()`; it stands
in for a network partition between one process and etcd (no iptables
needed). ServiceFront sends each new connection to a random backend, as a
Kubernetes Service in front of the brokers does."""
import random
import socket
import threading


def pump(src, dst):
    """Copies src to dst until either side ends, then shuts both down and
    closes src (its pair's pump closes dst)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    src.close()


def splice(a, b):
    """Joins two connected sockets, one pump thread each way."""
    threading.Thread(target=pump, args=(a, b), daemon=True).start()
    threading.Thread(target=pump, args=(b, a), daemon=True).start()


class TcpProxy:
    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.blocked = False
        self.conns = []
        self.mu = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.mu:
                if self.blocked:
                    c.close()
                    continue
                try:
                    u = socket.create_connection(self.target)
                except OSError:
                    c.close()
                    continue
                self.conns += [c, u]
            splice(c, u)

    def block(self):
        with self.mu:
            self.blocked = True
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def unblock(self):
        with self.mu:
            self.blocked = False

    def close(self):
        self.closed = True
        self.block()
        self.lsock.close()


class ServiceFront:
    """Listens on a loopback port (`endpoint`, http://127.0.0.1:PORT) and
    joins each accepted connection to a random port of `ports()` (called
    per connection: the backends serving at that moment), trying the others
    when one refuses; a connection no backend takes is closed. Existing
    connections stay where they went, as behind a Service."""

    def __init__(self, ports):
        self.ports = ports
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            ports = list(self.ports())
            random.shuffle(ports)
            u = None
            for p in ports:
                try:
                    u = socket.create_connection(("127.0.0.1", p), timeout=1)
                    u.settimeout(None)
                    break
                except OSError:
                    u = None
            if u is None:
                c.close()
                continue
            for x in (c, u):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            splice(c, u)

    def close(self):
        """Stops accepting; joined connections run on until either side ends."""
        self.lsock.close()
