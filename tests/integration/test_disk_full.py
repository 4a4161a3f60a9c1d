"""A full spool disk (issue 31): a broker whose $TMPDIR (where spools
live) is a small tmpfs the test mounts. An append that cannot be written
is answered at once, UNAVAILABLE (which Gazette's clients retry), naming
the journal, the spool's directory and the errno; the spool rolls at its
last commit and is persisted, which frees its space, so appends resume on
their own; /debug/ready's body and two metrics show the condition while
it lasts; nothing acknowledged is lost, and the broker never exits. At
replication 1 (the primary's disk) and 3 (a replica's disk)."""
import os
import re
import subprocess
import time
import urllib.request

import grpc
import pytest

import protocol_pb2 as pb
from gazpb import Client, read_replica, spec, wait_route

CHUNK = 256 << 10
TMPFS_MB = 24


@pytest.fixture
def tmpfs(tmp_path):
    d = tmp_path / "spool-tmpfs"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700" % TMPFS_MB, "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (%s): the disk-full tests need one" % r.stderr.strip())
    yield str(d)
    subprocess.run(["umount", "-l", str(d)])


def http(b, path):
    with urllib.request.urlopen(b.address + path, timeout=10) as r:
        return r.status, r.read().decode()


def metric(b, name, journal):
    _, body = http(b, "/debug/metrics")
    m = re.search(r'^%s\{journal="%s"\} (\S+)' % (name, re.escape(journal)), body, re.M)
    return float(m.group(1)) if m else None


class Appends:
    """CHUNK-sized records, each unique, appended one at a time: the
    acknowledged ones by offset, and the refused ones."""

    def __init__(self, c, journal):
        self.c, self.journal, self.acked, self.refused = c, journal, {}, set()

    def one(self):
        """Appends the next record: its AppendResponse, or the RpcError."""
        rec = (b"%08d" % (len(self.acked) + len(self.refused))) * (CHUNK // 8)
        try:
            r = self.c.append(self.journal, rec, timeout=20, retry=False)
        except grpc.RpcError as e:
            self.refused.add(rec)
            return e
        assert r.status == pb.OK, r
        self.acked[r.commit.begin] = rec
        return r

    def until_refused(self, limit_mb=4 * TMPFS_MB):
        """Appends until one is refused. Returns (error, its seconds)."""
        for _ in range(limit_mb * (1 << 20) // CHUNK):
            t0 = time.time()
            r = self.one()
            if isinstance(r, grpc.RpcError):
                return r, time.time() - t0
        raise AssertionError("%d MiB appended into a %d MiB spool disk without a refusal" % (limit_mb, TMPFS_MB))

    def until_accepted(self, timeout=30):
        """Appends until one is acknowledged (the spool's space was
        freed); every refusal meanwhile is UNAVAILABLE."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.one()
            if not isinstance(r, grpc.RpcError):
                return
            assert r.code() == grpc.StatusCode.UNAVAILABLE, r
            time.sleep(0.2)
        raise AssertionError("appends to %s did not resume within %d s" % (self.journal, timeout))

    def bytes(self):
        return sum(len(v) for v in self.acked.values())

    def check(self, data):
        """Every acknowledged append reads back identical at its offset.
        Between them the journal holds only whole refused records: a
        refusal by a peer after the primary committed may have committed
        (as Gazette's answer says), but nothing partial is ever
        committed."""
        end = 0
        for off in sorted(self.acked):
            assert off >= end and (off - end) % CHUNK == 0, \
                "acknowledged append at %d follows partial content from %d" % (off, end)
            for at in range(end, off, CHUNK):
                assert data[at:at + CHUNK] in self.refused, "unknown content at %d" % at
            got = data[off:off + CHUNK]
            assert got == self.acked[off], "acknowledged append at %d reads back different" % off
            end = off + CHUNK
        assert len(data) >= end, "the journal holds %d bytes, %d acknowledged" % (len(data), end)


def check_refusal(e, took, tmpfs):
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert took < 1.0, "the refused append took %.2f s" % took
    msg = e.details()
    assert "ENOSPC" in msg and "No space left on device" in msg, msg
    assert tmpfs in msg, "the error does not name the spool directory: %s" % msg


def test_full_spool_disk_at_replication_1(cluster, tmpfs):
    b = cluster.start(env={"TMPDIR": tmpfs})
    c = Client(b.address)
    c.apply(spec("full/r1", length=64 << 20))
    wait_route(c, "full/r1", 1)
    ap = Appends(c, "full/r1")
    e, took = ap.until_refused()
    check_refusal(e, took, tmpfs)
    assert '"full/r1"' in e.details(), e.details()
    # While it lasts: ready (the broker serves its other journals), and
    # the body, the gauge and the counter say what fails.
    status, body = http(b, "/debug/ready")
    assert status == 200 and "spool write failing" in body and "ENOSPC" in body, body
    assert metric(b, "gazette_spool_write_failing", "full/r1") == 1
    assert metric(b, "gazette_spool_write_failures_total", "full/r1") >= 1
    # The spool rolled at its last commit and was persisted: its space
    # frees, and appends resume without anyone acting, and go on past
    # twice the disk's size.
    ap.until_accepted()
    assert metric(b, "gazette_spool_write_failing", "full/r1") == 0
    assert http(b, "/debug/ready") == (200, "")
    while ap.bytes() < 3 * TMPFS_MB << 20:
        ap.until_accepted()
    # At replication 1 nothing refused was committed.
    data = read_replica(c, "full/r1", cluster.file_root)
    ap.check(data)
    assert len(data) == ap.bytes()
    assert b.proc.poll() is None, "the broker exited"


def test_full_replica_disk_at_replication_3(cluster, tmpfs):
    brokers = [cluster.start(zone="z0"), cluster.start(zone="z1"),
               cluster.start(zone="z2", env={"TMPDIR": tmpfs})]
    small = brokers[2]
    c = Client(brokers[0].address)
    journal = None
    for i in range(8):  # a journal whose small-disk member is a replica
        n = "full/r3-%d" % i
        c.apply(spec(n, replication=3, length=64 << 20))
        route = wait_route(c, n, 3)
        if route.members[route.primary].suffix != small.id:
            journal = n
            break
    assert journal, "the small-disk broker led every journal"
    primary = next(b for b in brokers if b.id == route.members[route.primary].suffix)
    ap = Appends(Client(primary.address), journal)
    e, took = ap.until_refused()
    check_refusal(e, took, tmpfs)
    assert small.id in e.details(), "the error does not name the replica: %s" % e.details()
    status, body = http(small, "/debug/ready")
    assert status == 200 and "spool write failing" in body, body
    assert metric(small, "gazette_spool_write_failures_total", journal) >= 1
    while ap.bytes() < 3 * TMPFS_MB << 20:
        ap.until_accepted()
    # The route is whole, and every member serves the same journal.
    assert len(wait_route(c, journal, 3).members) == 3
    reads = [read_replica(Client(b.address), journal, cluster.file_root) for b in brokers]
    for b, data in zip(brokers, reads):
        ap.check(data)
        assert data == reads[0], "broker %s serves a different journal" % b.id
        assert b.proc.poll() is None, "broker %s exited" % b.id
