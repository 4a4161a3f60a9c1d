"""Blocking readers follow every commit while brokers roll.

A journal at replication 3 takes a steady stream of small appends while
its brokers are replaced one at a time (a replacement first, then SIGTERM
to the old one, as a rolling update does). Readers hold blocking reads on
every broker, each reopening its read where it left off when its stream
ends (as Gazette's RetryReader does): one kind through a fixed broker,
proxied when that broker is not a member; one kind dispatched by the
route of the last response's header (Gazette's dispatcher: the first
member of the route, dialled directly); and Gazette's own gazctl
(`journals read --block`, its RetryReader with no route cache, as
stream-sum's chunker reads) through a front that sends each new
connection to a random live broker, as a Kubernetes Service does.

Each reader must see every acknowledged byte, in order, within a bound
of its commit (a committed append wakes its readers at once, wherever
they wait: primary, replica, a replica that joined or left the route)."""
import os
import random
import subprocess
import threading
import time

import grpc

import protocol_pb2 as pb
import tcpproxy
from conftest import GO_GAZCTL
from gazpb import Client, spec, wait_route

JOURNAL = "roll/readers"
LAG_BOUND_S = 8.0


class Follower:
    """A blocking reader of JOURNAL that reopens its read at its offset
    whenever the stream ends. `pick(last_header)` gives the address to
    read through next."""

    def __init__(self, name, pick, do_not_proxy=False, slow_s=0.0, reopen_s=0.0):
        self.name, self.pick, self.do_not_proxy = name, pick, do_not_proxy
        self.slow_s, self.reopen_s = slow_s, reopen_s
        self.data = bytearray()
        self.header = None
        self.seen = []  # (offset end, time)
        self.errors = []
        self.stop = threading.Event()
        self.call = None
        self.mu = threading.Lock()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        clients = {}
        while not self.stop.is_set():
            address = self.pick(self.header)
            if address not in clients:
                clients[address] = Client(address)
            c = clients[address]
            try:
                call = c._read(pb.ReadRequest(journal=JOURNAL, offset=len(self.data), block=True,
                                              do_not_proxy=self.do_not_proxy), timeout=300)
                with self.mu:
                    self.call = call
                opened = time.time()
                for r in call:
                    if self.slow_s:
                        time.sleep(self.slow_s)
                    if r.header.HasField("etcd"):
                        self.header = r.header
                    if r.status != pb.OK:
                        self.errors.append("%s via %s" % (pb.Status.Name(r.status), address))
                        time.sleep(0.05)
                        break
                    if r.content:
                        assert r.offset == len(self.data), "%s: chunk at %d, expected %d" % (
                            self.name, r.offset, len(self.data))
                        self.data += r.content
                        self.seen.append((len(self.data), time.time()))
                    if self.reopen_s and time.time() - opened > self.reopen_s:
                        call.cancel()
                        break
            except grpc.RpcError as e:
                if self.stop.is_set():
                    break
                if e.code() == grpc.StatusCode.CANCELLED and self.reopen_s:
                    continue
                self.errors.append("%s via %s" % (e.code().name, address))
                time.sleep(0.05)
        for c in clients.values():
            c.close()

    def finish(self):
        self.stop.set()
        with self.mu:
            if self.call:
                self.call.cancel()
        self.t.join(30)

    def seen_at(self, end):
        """When this reader first held bytes through `end`, or None."""
        for off, t in self.seen:
            if off >= end:
                return t
        return None


class GoReader:
    """Gazette's gazctl following JOURNAL (--block, no route cache) through
    `endpoint`; its output file grows as it reads, and a thread notes when
    each length was reached."""

    def __init__(self, name, endpoint, out_path):
        self.name, self.path = name, out_path
        self.seen, self.stop = [], threading.Event()
        self.log = open(out_path + ".log", "w")
        self.proc = subprocess.Popen(
            [GO_GAZCTL, "journals", "read", "-l", "name=%s" % JOURNAL, "--block",
             "--broker.address", endpoint, "--broker.cache.size", "0", "--output", out_path],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.t = threading.Thread(target=self.watch, daemon=True)
        self.t.start()

    def watch(self):
        last = -1
        while not self.stop.is_set():
            n = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            if n != last:
                self.seen.append((n, time.time()))
                last = n
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        self.t.join(10)
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        with open(self.path, "rb") as f:
            self.data = f.read()
        self.errors = open(self.path + ".log").read()[-2000:]

    def seen_at(self, end):
        for off, t in self.seen:
            if off >= end:
                return t
        return None


def test_blocking_readers_follow_every_commit_while_brokers_roll(cluster, tmp_path):
    live = [cluster.start() for _ in range(3)]
    c = Client(live[0].address)
    c.apply(spec(JOURNAL, replication=3, length=1 << 14, refresh_s=1))
    wait_route(c, JOURNAL, 3)

    def first_member(header):
        if header is not None and header.route.endpoints:
            return header.route.endpoints[0]
        return live[0].address

    followers = [Follower("dispatched", first_member)]
    for i in range(3):
        b = live[i]
        followers.append(Follower("fixed-%d" % i, lambda h, b=b: b.address if b.proc.poll() is None
                                  else live[-1].address))

    rng = random.Random(7)

    def any_live(_header):
        return rng.choice([b.address for b in live if b.proc.poll() is None])

    # Behind the head, reopened every 2 s on a random broker: reads that
    # start in fragments a new replica knows only from its listing.
    for i in range(3):
        followers.append(Follower("lagging-%d" % i, any_live, slow_s=0.01 * (i + 1), reopen_s=2.0))

    front = tcpproxy.ServiceFront(lambda: [b.port for b in live if b.proc.poll() is None and b.signalled is None])
    followers += [GoReader("gazctl-%d" % i, front.endpoint, str(tmp_path / ("gazctl-%d.out" % i)))
                  for i in range(2)]

    acked, stop = [], threading.Event()

    def append():
        clients, i = {}, 0
        while not stop.is_set():
            rec = b"<%07d>\n" % i
            address = live[-1].address
            if address not in clients:
                clients[address] = Client(address)
            try:
                r = clients[address].append(JOURNAL, rec, timeout=10)
                if r.status == pb.OK:
                    acked.append((r.commit.begin, r.commit.end, rec, time.time()))
                    i += 1
            except grpc.RpcError:
                pass
            time.sleep(0.02)
        for cl in clients.values():
            cl.close()

    at = threading.Thread(target=append, daemon=True)
    at.start()
    for roll in range(int(os.environ.get("GAZ_TEST_ROLLS", "5"))):
        time.sleep(3)
        old = live.pop(0)
        live.append(cluster.start())
        assert old.stop(timeout=60) == 0
    time.sleep(3)
    stop.set()
    at.join(30)
    time.sleep(LAG_BOUND_S)
    for f in followers:
        f.finish()
    front.close()

    assert len(acked) > 100
    head = max(e for _, e, _, _ in acked)
    worst = []
    for f in followers:
        assert len(f.data) >= head, "%s holds %d of %d bytes (errors %s)" % (f.name, len(f.data), head,
                                                                           f.errors[-5:])
        for begin, end, rec, t in acked:
            assert bytes(f.data[begin:end]) == rec, "%s: [%d,%d) differs" % (f.name, begin, end)
        lag = max(f.seen_at(end) - t for _, end, _, t in acked)
        worst.append((lag, f.name))
    print("worst lag per reader:", ", ".join("%s %.2fs" % (n, l) for l, n in worst))
    assert max(worst)[0] < LAG_BOUND_S, worst
    c.close()
