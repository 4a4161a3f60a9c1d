"""A broker's exit never drops the only copy of acknowledged bytes by
itself: a lone broker (replication 1) whose journal's first bucket refuses
its uploads, then SIGTERM. The buckets are SeaweedFS behind a recording
proxy that answers the first bucket's fragment PUTs 403 AccessDenied or
503 SlowDown."""
import os
import signal
import time

import grpc
import pytest

from urllib.parse import quote

import protocol_pb2 as pb
from conftest import wait_for
from gazpb import Client, spec, wait_assigned
from test_s3 import Recorder, persisted

KIB = 1024
BLOCK = 1100  # one append: above the 1 KiB fragment length, so each next append rolls


def url(rec, bucket):
    return "s3://%s/p/?endpoint=%s&region=us-east-1" % (bucket, quote(rec.endpoint, safe=""))


def fragment_puts(rec, bucket):
    return sum(1 for m, path, _ in rec.seen if m == "PUT" and path.startswith("/%s/p/" % bucket))


def setup_lone(cluster, s3, status, exit_timeout):
    """One broker; ex/j at replication 1 on [gz-a, gz-b] with 1 KiB
    fragments; one block (1,100 bytes) persisted to gz-a, then gz-a refuses
    and two more blocks are acknowledged. Returns (recorder, buckets,
    broker, data)."""
    rec = Recorder(s3.endpoint)
    a, b = s3.new_bucket(), s3.new_bucket()
    broker = cluster.start(env=s3.env(), extra=["--broker.exit-timeout", exit_timeout])
    c = Client(broker.address)
    c.apply(spec("ex/j", stores=(url(rec, a), url(rec, b)), length=KIB))
    wait_assigned(c, "ex/j")
    data = b"A" * BLOCK + b"B" * BLOCK + b"C" * BLOCK
    for i in range(2):
        r = c.append("ex/j", data[i * BLOCK:(i + 1) * BLOCK])
        assert r.status == pb.OK, r
    wait_for(lambda: len(persisted(c, "ex/j")) == 1, 30, "the first block persisted to gz-a")
    rec.refuse_put[a] = status
    r = c.append("ex/j", data[2 * BLOCK:])  # rolls the second block: its upload is refused
    assert r.status == pb.OK and r.commit.end == 3 * BLOCK, r
    wait_for(lambda: "persisting fragment failed" in open(broker.logpath).read(), 30,
             "a refused upload")
    return rec, (a, b), broker, data


def read_back_and_continue(cluster, s3, data):
    """A fresh broker reads every acknowledged byte and appends after them."""
    fresh = cluster.start(env=s3.env())
    c = Client(fresh.address)
    wait_assigned(c, "ex/j")
    got, _ = c.read_bytes("ex/j", offset=0, end_offset=len(data), timeout=30)
    assert got == data
    r = c.append("ex/j", b"D")
    assert r.status == pb.OK and r.commit.begin == len(data), r
    assert fresh.stop() == 0


def test_exit_falls_back_to_the_next_store_on_access_denied(cluster, s3):
    """403: the exiting broker passes over gz-a for gz-b (as Gazette's
    exiting persister does), exits 0, and gz-b holds the two blocks gz-a
    refused."""
    # A lone broker keeps its journal until the exit timeout (no other
    # broker can take it), then persists and releases.
    rec, (a, b), broker, data = setup_lone(cluster, s3, 403, "2s")
    t0 = time.time()
    assert broker.stop(timeout=60) == 0, broker.logtail()
    assert time.time() - t0 < 12
    keys = sorted(os.path.basename(k) for k in s3.keys(b, "p/ex/j/"))
    ranges = [tuple(int(x, 16) for x in k.split("-")[:2]) for k in keys]
    assert ranges == [(BLOCK, 2 * BLOCK), (2 * BLOCK, 3 * BLOCK)], keys
    log = open(broker.logpath).read()
    assert "trying the journal's next store" in log and "exiting with fragments not persisted" not in log
    read_back_and_continue(cluster, s3, data)


def test_exit_waits_past_its_timeout_for_bytes_only_it_holds(cluster, s3):
    """503: the broker does not exit while two blocks exist only in its
    spools. It retries with a bounded back-off (no hot loop), says what it
    waits for, serves reads of them meanwhile, and exits 0 once the bucket
    recovers."""
    rec, (a, b), broker, data = setup_lone(cluster, s3, 503, "3s")
    before = fragment_puts(rec, a)
    t0 = time.time()
    broker.signal(signal.SIGTERM)
    # The persister's drain lasts the exit timeout, and at least 30 s.
    wait_for(lambda: "exit timeout passed" in open(broker.logpath).read(), 60, "the exit timeout")
    took = time.time() - t0
    time.sleep(5)
    assert broker.proc.poll() is None, broker.logtail()
    log = open(broker.logpath).read()
    assert "exit timeout passed with acknowledged bytes no peer holds" in log, broker.logtail()
    assert "fragment not persisted" in log and "sole_copy=true" in log
    # Back-offs of 1, 2, 4 and then 8 s per fragment (each attempt is one
    # S3 request and its 4 retries): never a hot loop.
    attempts = log[log.index("signalled; exiting"):].count("persisting fragment failed")
    assert attempts <= 2 * ((took + 5) / 8 + 4), (attempts, took)
    assert fragment_puts(rec, a) - before <= 5 * attempts + 10, (fragment_puts(rec, a) - before, attempts)
    assert not s3.keys(b, "p/ex/j/")
    # Meanwhile it still serves reads of every acknowledged byte (the first
    # block from gz-a, the two it alone holds from its spools), and refuses
    # appends with UNAVAILABLE, which clients retry.
    c = Client(broker.address)
    got, last = c.read_bytes("ex/j", offset=0, timeout=15)
    assert got == data, (len(got), last)
    assert last.status == pb.OFFSET_NOT_YET_AVAILABLE and last.write_head == len(data), last
    with pytest.raises(grpc.RpcError) as refused:
        c.append("ex/j", b"X", timeout=10, retry=False)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
    del rec.refuse_put[a]
    assert broker.proc.wait(30) == 0, broker.logtail()
    broker.check_sanitizers()
    read_back_and_continue(cluster, s3, data)


def test_a_second_signal_exits_without_the_bytes_and_says_so(cluster, s3):
    """The wait ends only by the operator's decision: a second SIGTERM exits
    1, and the log names what was not persisted."""
    rec, (a, b), broker, data = setup_lone(cluster, s3, 503, "2s")
    broker.signal(signal.SIGTERM)
    wait_for(lambda: "exit timeout passed" in open(broker.logpath).read(), 60, "the exit timeout")
    broker.proc.send_signal(signal.SIGTERM)
    assert broker.proc.wait(15) == 1, broker.logtail()
    log = open(broker.logpath).read()
    assert "signalled again; exiting without persisting" in log
    assert "exiting with fragments not persisted" in log and "begin=%d end=%d" % (BLOCK, 2 * BLOCK) in log
