"""Real-world cases from shared/cases/broker.md against the real S3 server
(SeaweedFS, conftest's `s3` fixture): BR-01, BR-07, BR-08, BR-12, BR-13,
BR-14, BR-15 and BR-22. Objects are placed and inspected with boto3;
faults a real server does not make on demand (a denied DELETE, a store
that transcodes gzip, a GET held past its URL's expiry) come from the
recording proxy of test_s3.py in front of the real server. Direct reads go
through our client library (tests/tools/client_probe.c) and Gazette's
gazctl."""
import gzip
import hashlib
import os
import random
import re
import subprocess
import threading
import time

import grpc
import pytest

import protocol_pb2 as pb
from conftest import BIN, GAZCTL, GO_GAZCTL, wait_for
from gazpb import Client, spec, wait_assigned
from test_s3 import Recorder, gazctl, persisted, records, recorded_url

PROBE = os.path.join(BIN, "client-probe")


def probe_read(address, journal, offset, end, s3=None, direct=True, block=True, retry=True, timeout=120):
    """Reads [offset, end) with our client library; returns the process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_"))}
    env.update(PROBE_DO_NOT_PROXY="1" if direct else "0", PROBE_BLOCK="1" if block else "0",
               PROBE_RETRY="1" if retry else "0", PROBE_CACHE="64")
    return subprocess.run([PROBE, "read", address, journal, str(offset), str(end)], capture_output=True,
                          env=env, timeout=timeout)


def put_object(s3, bucket, key, body, **kw):
    s3.client().put_object(Bucket=bucket, Key=key, Body=body, **kw)


def content_name(begin, content, ext):
    return "%016x-%016x-%s%s" % (begin, begin + len(content), hashlib.sha1(content).hexdigest(), ext)


def write_head(c, journal):
    rs = c.read(journal, offset=-1, metadata_only=True)
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE, rs[-1]
    return rs[-1].write_head


# ---- BR-01 ----------------------------------------------------------------------------


def test_BR01_lifecycle_emptied_journal_persists_next_write_quickly(cluster, s3):
    """The first write reaches the bucket within 5 s. After a lifecycle
    rule deletes every object of the idle journal, the next write again
    holds the index's first offset, so it is rolled and persisted within
    70 s (ours: at once), not after the 1 h flush interval or 1 MiB; the
    write head stays at 200 (no offset reuse)."""
    bucket = s3.new_bucket()
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("lc/idle", stores=(s3.url(bucket, "lc/"),), length=1 << 20, codec=pb.NONE, refresh_s=1,
                 flush_s=3600))
    wait_assigned(c, "lc/idle")
    a = b"A" * 100
    assert c.append("lc/idle", a).status == pb.OK
    first = "lc/lc/idle/" + content_name(0, a, ".raw")
    wait_for(lambda: first in s3.keys(bucket), 5, "the first-write roll to persist %s" % first)
    cl = s3.client()
    for k in s3.keys(bucket, "lc/lc/idle/"):
        cl.delete_object(Bucket=bucket, Key=k)
    assert s3.keys(bucket, "lc/lc/idle/") == []
    time.sleep(3)
    t0 = time.time()
    bb = b"B" * 100
    r = c.append("lc/idle", bb)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (100, 200)
    second = "lc/lc/idle/" + content_name(100, bb, ".raw")
    wait_for(lambda: second in s3.keys(bucket), 70, "the emptied journal's next write to persist")
    assert time.time() - t0 < 70
    assert write_head(c, "lc/idle") == 200
    got, _ = c.read_bytes("lc/idle", offset=100)
    assert got == bb
    assert cl.get_object(Bucket=bucket, Key=second)["Body"].read() == bb


# ---- BR-07 ----------------------------------------------------------------------------


def hold_append(c, journal, chunk, offset):
    """Starts an append at `offset` that keeps streaming `chunk`s (fast
    enough for the broker's minimum append rate) and so holds the
    journal's pipeline until release() is called, which commits it.
    Returns release, which answers {"resp": AppendResponse, "n": chunks}
    or {"err": RpcError}."""
    go, out = threading.Event(), {"n": 0}

    def gen():
        yield pb.AppendRequest(journal=journal, offset=offset)
        while not go.is_set():
            out["n"] += 1
            yield pb.AppendRequest(content=chunk)
            time.sleep(0.01)
        yield pb.AppendRequest()

    def run():
        try:
            out["resp"] = c._append(gen(), timeout=60)
        except grpc.RpcError as e:
            out["err"] = e
    t = threading.Thread(target=run)
    t.start()

    def release():
        go.set()
        t.join(60)
        return out
    return release


def test_BR07_dirty_bucket_blocks_appends_until_reset_head(cluster, s3):
    bucket = s3.new_bucket()
    url = s3.url(bucket, "dirty/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    s = spec("dirty/j", stores=(url,), length=1024)
    c.apply(s)
    wait_assigned(c, "dirty/j")
    for i in range(3):
        assert c.append("dirty/j", bytes([65 + i]) * 100).status == pb.OK
    # Stop gracefully: all 300 bytes reach the bucket.
    assert b.stop() == 0
    ends = sorted(int(os.path.basename(k).split("-")[1], 16) for k in s3.keys(bucket, "dirty/dirty/j/"))
    assert ends and ends[-1] == 300
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "dirty/j")
    # Lose the journal's metadata: delete the spec, wait, re-apply it new.
    rev = [j.mod_revision for j in c.list() if j.spec.name == "dirty/j"][0]
    assert c.apply(deletes=[("dirty/j", rev)]).status == pb.OK
    time.sleep(3)
    assert c.apply(s).status == pb.OK
    wait_assigned(c, "dirty/j")
    # Step 3: nothing is committed over the bucket's offsets.
    r = c.append("dirty/j", b"x" * 10)
    assert r.status == pb.INDEX_HAS_GREATER_OFFSET and not r.HasField("commit")
    # Step 4.
    rs = c.read("dirty/j", offset=-1, metadata_only=True)
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE and rs[-1].offset == 300 and rs[-1].write_head == 300
    # Step 7, read-only: reads work, an empty append is no error, and it
    # does not quietly reset the head.
    ro = spec("dirty/j", stores=(url,), length=1024, flags=pb.JournalSpec.O_RDONLY)
    rev = [j.mod_revision for j in c.list() if j.spec.name == "dirty/j"][0]
    assert c.apply(ro, expect=rev).status == pb.OK
    wait_for(lambda: c.append("dirty/j", b"").status == pb.OK, 10, "an empty append to a read-only journal")
    assert c.read_bytes("dirty/j")[0] == b"A" * 100 + b"B" * 100 + b"C" * 100
    rev = [j.mod_revision for j in c.list() if j.spec.name == "dirty/j"][0]
    assert c.apply(s, expect=rev).status == pb.OK
    wait_for(lambda: c.append("dirty/j", b"x").status == pb.INDEX_HAS_GREATER_OFFSET, 10,
             "the writable journal to refuse again")
    # Step 6: a writer at offset 300 holds the pipeline while reset-head
    # runs; the writer commits first and reset-head loses (raced), exit 0.
    chunk = b"R" * 4096
    release = hold_append(c, "dirty/j", chunk, 300)
    time.sleep(0.5)
    p = subprocess.Popen([GAZCTL, "journals", "reset-head", "--log.level", "info", "-l", "name=dirty/j"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, BROKER_ADDRESS=b.address))
    time.sleep(1.5)
    assert p.poll() is None, (p.communicate(), release())  # waiting for the writer's pipeline
    out = release()
    assert out.get("resp") and out["resp"].status == pb.OK, out
    head = 300 + out["n"] * len(chunk)
    assert (out["resp"].commit.begin, out["resp"].commit.end) == (300, head)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert b"did not reset (raced writes)" in err, err
    # Step 5: once more with nobody racing: reset-head is a no-op at the
    # head, and appends continue at it.
    gazctl(GAZCTL, b.address, "journals", "reset-head", "-l", "name=dirty/j")
    r = c.append("dirty/j", b"z" * 10)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (head, head + 10)
    assert c.read_bytes("dirty/j")[0] == b"A" * 100 + b"B" * 100 + b"C" * 100 + b"R" * (head - 300) + b"z" * 10


def test_BR07_reset_head_then_append_at_the_buckets_end(cluster, s3):
    """BR-07 step 5 as written: after metadata loss (etcd wiped, broker
    restarted), reset-head exits 0 and the next append commits at
    [300, 310)."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "dirty/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("dirty/k", stores=(url,), length=1024))
    wait_assigned(c, "dirty/k")
    for i in range(3):
        assert c.append("dirty/k", bytes([97 + i]) * 100).status == pb.OK
    assert b.stop() == 0
    cluster.etcd.ctl("del", "--prefix", cluster.prefix)
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("dirty/k", stores=(url,), length=1024))
    wait_assigned(c, "dirty/k")
    assert c.append("dirty/k", b"x" * 10).status == pb.INDEX_HAS_GREATER_OFFSET
    gazctl(GAZCTL, b.address, "journals", "reset-head", "-l", "name=dirty/k")
    r = c.append("dirty/k", b"n" * 10)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (300, 310)
    assert c.read_bytes("dirty/k")[0] == b"a" * 100 + b"b" * 100 + b"c" * 100 + b"n" * 10


# ---- BR-08 ----------------------------------------------------------------------------


def test_BR08_direct_and_proxied_reads_stop_at_end_offset(cluster, s3):
    bucket = s3.new_bucket()
    text = b"hello, world\n"
    key = "eo/eo/j/0000000000000000-000000000000000d-cd50d19784897085a8d0e3e413f8612b097c03f1.gz"
    assert key.endswith(content_name(0, text, ".gz"))
    put_object(s3, bucket, key, gzip.compress(text))
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("eo/j", stores=(s3.url(bucket, "eo/"),), flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "eo/j")
    # Step 1: our client library, do_not_proxy, fetching the signed URL.
    p = probe_read(b.address, "eo/j", 2, 7)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"llo, "
    # Step 2: the broker streams it.
    got, last = c.read_bytes("eo/j", offset=2, end_offset=7)
    assert got == b"llo, " and last.status == pb.OK
    # Step 3, controls.
    for direct in (True, False):
        p = probe_read(b.address, "eo/j", 2, 13, direct=direct)
        assert p.returncode == 0 and p.stdout == b"llo, world\n", p.stderr
        p = probe_read(b.address, "eo/j", 2, 0, direct=direct, block=False)
        assert p.returncode == 0 and p.stdout == b"llo, world\n", p.stderr
        assert b"tail at 13" in p.stderr
    got, last = c.read_bytes("eo/j", offset=2, end_offset=13)
    assert got == b"llo, world\n"
    got, last = c.read_bytes("eo/j", offset=2)
    assert got == b"llo, world\n" and last.status == pb.OFFSET_NOT_YET_AVAILABLE and last.offset == 13
    # A blocking read with no end goes on waiting past the fragment.
    p = subprocess.Popen([PROBE, "read", b.address, "eo/j", "2", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=dict(os.environ, PROBE_DO_NOT_PROXY="1", PROBE_CACHE="64"))
    time.sleep(2)
    assert p.poll() is None
    p.kill()
    out, _ = p.communicate()
    assert out == b"llo, world\n"


# ---- BR-12 ----------------------------------------------------------------------------

MULTI = gzip.compress(b"0123456789", mtime=0) + gzip.compress(b"abcdefghij", mtime=0)
MULTI_KEY = "gz/gz/multi/0000000000000000-0000000000000014-7c8e1dc5a4fd22f1311a7a1f3e3401215c0ccab3.gz"


def proxied_read_error(c, journal, offset=0):
    """Reads through the broker; returns (bytes, the gRPC error or None)."""
    data = bytearray()
    try:
        for r in c.read(journal, offset=offset):
            data += r.content
    except grpc.RpcError as e:
        return bytes(data), e
    return bytes(data), None


def test_BR12_multi_member_gzip_read_fully_and_bad_endings_fail(cluster, s3):
    assert len(MULTI) == 60 and MULTI_KEY.endswith(content_name(0, b"0123456789abcdefghij", ".gz"))
    bucket = s3.new_bucket()
    put_object(s3, bucket, MULTI_KEY, MULTI)
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("gz/multi", stores=(s3.url(bucket, "gz/"),), flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "gz/multi")
    # Step 1.
    got, err = proxied_read_error(c, "gz/multi")
    assert err is None and got == b"0123456789abcdefghij"
    got, err = proxied_read_error(c, "gz/multi", 15)
    assert err is None and got == b"fghij"
    p = probe_read(b.address, "gz/multi", 0, 20)
    assert p.returncode == 0 and p.stdout == b"0123456789abcdefghij", p.stderr
    out = gazctl(GO_GAZCTL, b.address, "journals", "read", "--broker.cache.size", "64", "-l",
                 "name=gz/multi").stdout
    assert out == b"0123456789abcdefghij"
    # Steps 2 and 3: a cut trailer, then trailing garbage.
    for body, needle in ((MULTI[:-8], b"unexpected EOF"), (MULTI + b"XXXXX", b"")):
        put_object(s3, bucket, MULTI_KEY, body)
        got, err = proxied_read_error(c, "gz/multi")
        assert err is not None, "a clean end for a bad object"
        assert got == b"0123456789abcdefghij"[:len(got)]
        assert needle.decode() in err.details(), err.details()
        # Our client, direct: the error is reported, not a clean end.
        p = probe_read(b.address, "gz/multi", 0, 0, block=False, retry=False)
        assert p.returncode == 1, (p.stdout, p.stderr)
        assert p.stdout == b"0123456789abcdefghij"[:len(p.stdout)]
        assert b"read failed" in p.stderr and needle in p.stderr, p.stderr
        # Retrying: it reports the error, retries at the offset it reached,
        # and neither skips nor repeats a byte.
        p = probe_read(b.address, "gz/multi", 0, 0, block=False, retry=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout == b"0123456789abcdefghij", p.stdout
        assert b"will retry" in p.stderr and needle in p.stderr and b"tail at 20" in p.stderr, p.stderr
    assert "reading persisted fragment failed" in open(b.logpath).read()


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


@pytest.mark.parametrize("codec,ext,encode", [
    (pb.NONE, ".raw", lambda d: d),
    (pb.ZSTANDARD, ".zst", zstd),
    (pb.GZIP, ".gz", lambda d: gzip.compress(d, mtime=0)),
], ids=["NONE", "ZSTANDARD", "GZIP"])
def test_BR12_every_codec_ends_exactly_at_the_fragment_end(cluster, s3, codec, ext, encode):
    """The kind of fault: an object whose decoded stream is cut short, runs
    past the fragment's end, or ends in garbage is an error for every
    codec, through the broker and through our client's direct read; the
    intact object reads cleanly."""
    bucket = s3.new_bucket()
    content = b"".join(b"%05d\n" % i for i in range(2000))
    key = "ce/ce/j/" + content_name(0, content, ext)
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("ce/j", stores=(s3.url(bucket, "ce/"),), codec=codec, flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "ce/j")
    good = encode(content)
    variants = [(good, True), (good[:-3], False), (good + b"\x00junk", False)]
    if codec != pb.NONE:
        variants.append((good + encode(b"more"), False))  # decodes past the end
    for body, ok in variants:
        put_object(s3, bucket, key, body)
        wait_for(lambda: c.fragments("ce/j").fragments, 10, "the index to list the object")
        got, err = proxied_read_error(c, "ce/j")
        assert (err is None) == ok, (len(body), err)
        assert got == content[:len(got)] and (not ok or got == content)
        p = probe_read(b.address, "ce/j", 0, 0, block=False, retry=False)
        assert (p.returncode == 0) == ok, (len(body), p.stderr)
        assert p.stdout == content[:len(p.stdout)] and (not ok or p.stdout == content)


def test_BR12_gzip_writer_round_trip(cluster, s3):
    """Step 4: our broker writes a 3 MiB GZIP fragment (members of about
    1 MiB each) that gzip -dc and Gazette's gazctl read back exactly."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "gz/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("gz/w", stores=(url,), length=8 << 20, codec=pb.GZIP))
    wait_assigned(c, "gz/w")
    data = records(50000, b"w")[:3 << 20]
    assert len(data) == 3 << 20
    r = c.append("gz/w", data)
    assert r.status == pb.OK
    assert b.stop() == 0  # rolls and persists
    keys = s3.keys(bucket, "gz/gz/w/")
    assert len(keys) == 1 and keys[0].endswith(content_name(0, data, ".gz"))
    body = s3.client().get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    out = subprocess.run(["gzip", "-dc"], input=body, capture_output=True, check=True).stdout
    assert out == data
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "gz/w")
    out = gazctl(GO_GAZCTL, b.address, "journals", "read", "--broker.cache.size", "64", "-l", "name=gz/w").stdout
    assert out == data


# ---- BR-13 ----------------------------------------------------------------------------


@pytest.mark.parametrize("transcode", [False, True], ids=["raw-store", "transcoding-store"])
def test_BR13_offload_decompression_decoded_exactly_once(cluster, s3, transcode):
    """GZIP_OFFLOAD_DECOMPRESSION objects carry Content-Encoding: gzip. The
    real server returns the gzip bytes whatever the Accept-Encoding (as
    MinIO); the proxy variant decodes them for requests that do not
    accept gzip (as GCS). Either way, direct and proxied reads return the
    content decoded once, and no Range is asked of compressed bytes."""
    rec = Recorder(s3.endpoint)
    rec.transcode = transcode
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "off/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("off/j", stores=(url,), codec=pb.GZIP_OFFLOAD_DECOMPRESSION))
    wait_assigned(c, "off/j")
    text = b"".join(b"line %04d of offloaded text\n" % i for i in range(100))[:2000]
    assert len(text) == 2000
    assert c.append("off/j", text).status == pb.OK
    assert b.stop() == 0
    # Step 1: no extension, Content-Encoding: gzip.
    keys = s3.keys(bucket, "off/off/j/")
    assert keys == ["off/off/j/" + content_name(0, text, "")], keys
    head = s3.client().head_object(Bucket=bucket, Key=keys[0])
    assert head["ContentEncoding"] == "gzip"
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "off/j")
    rec.ranges.clear()
    # Step 2: direct reads (our client; Gazette's gazctl from 0).
    for off in (0, 1500):
        p = probe_read(b.address, "off/j", off, 2000)
        assert p.returncode == 0, p.stderr
        assert p.stdout == text[off:]
    out = gazctl(GO_GAZCTL, b.address, "journals", "read", "--broker.cache.size", "64", "-l",
                 "name=off/j").stdout
    assert out == text
    # Step 3: the broker reads it.
    for off in (0, 1500):
        got, err = proxied_read_error(c, "off/j", off)
        assert err is None and got == text[off:], err
    assert rec.ranges and all(r is None for r in rec.ranges), rec.ranges
    rec.shutdown()


def test_BR13_offload_codec_refused_on_a_file_store(cluster):
    b = cluster.start()
    c = Client(b.address)
    with pytest.raises(grpc.RpcError) as e:
        c.apply(spec("off/file", stores=("file:///",), codec=pb.GZIP_OFFLOAD_DECOMPRESSION))
    assert "GZIP_OFFLOAD_DECOMPRESSION" in e.value.details(), e.value.details()
    assert not [j for j in c.list() if j.spec.name == "off/file"]


# ---- BR-14 ----------------------------------------------------------------------------


def test_BR14_expired_signed_url_is_refreshed_and_url_ttl_honoured(cluster, s3):
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "ttl/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    # A spool rolls once it holds more than `length` (Gazette's rule), so
    # each 1 MiB append ends up a fragment of its own.
    c.apply(spec("ttl/j", stores=(url,), length=(1 << 20) - 1, codec=pb.NONE))
    wait_assigned(c, "ttl/j")
    block = hashlib.sha256(b"ttl").digest() * (1 << 15)  # 1 MiB
    data = b"".join(bytes([i]) + block[1:] for i in range(3))
    for i in range(3):
        assert c.append("ttl/j", data[i << 20:(i + 1) << 20]).status == pb.OK
    assert b.stop() == 0
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "ttl/j")
    frags = persisted(c, "ttl/j")
    assert [(f.begin, f.end) for f in frags] == [(0, 1 << 20), (1 << 20, 2 << 20), (2 << 20, 3 << 20)]
    # Step 1: the signed GET of fragment 2 reaches the store after its
    # one-minute URL expired; the reader asks the broker again.
    name2 = "%016x-%016x-" % (1 << 20, 2 << 20)
    rec.hold = {"/" + name2 + hashlib.sha1(data[1 << 20:2 << 20]).hexdigest() + ".raw": 65}
    rec.seen.clear()
    p = probe_read(b.address, "ttl/j", 0, 3 << 20, timeout=180)
    assert p.returncode == 0, p.stderr
    assert hashlib.sha1(p.stdout).hexdigest() == hashlib.sha1(data).hexdigest() and len(p.stdout) == len(data)
    assert b"403" in p.stderr and b"will retry" in p.stderr, p.stderr
    gets = [path for m, path, q in rec.seen if m == "GET" and q and name2 in path]
    assert len(gets) == 2, rec.seen  # the expired URL, then a fresh one
    # Step 2: --url-ttl, both gazctls.
    for exe in (GAZCTL, GO_GAZCTL):
        out = gazctl(exe, b.address, "journals", "fragments", "-l", "name=ttl/j", "--url-ttl", "1h", "-o",
                     "json").stdout.decode()
        urls = re.findall(r'"SignedURL":\s*"([^"]+)"', out) or re.findall(r'"signed_url":\s*"([^"]+)"', out)
        assert len(urls) == 3, (exe, out)
        assert all("X-Amz-Expires=3600" in u.replace("\\u0026", "&") for u in urls), urls
        out = gazctl(exe, b.address, "journals", "fragments", "-l", "name=ttl/j", "-o", "json").stdout.decode()
        assert "X-Amz" not in out and out.count("ttl/j") >= 3, out
    rec.shutdown()


# ---- BR-15 ----------------------------------------------------------------------------


BR15_RECORD = 1024


def br15_record(i):
    head = b"%08d|" % i
    return head + b"t" * (BR15_RECORD - len(head) - 1) + b"\n"


class Br15Run:
    """Shared state of the BR-15 run: the writer's acknowledged commits and
    every reader's findings."""

    def __init__(self, n):
        self.n = n
        self.acked = []          # (begin, end, i)
        self.head = 0            # the largest write head any reader was told
        self.done = threading.Event()
        self.errors = []         # violations, with context
        self.transient = 0
        self.r1 = bytearray()
        self.r2 = []             # (offset, bytes)
        self.r1_stream = None
        self.lock = threading.Lock()

    def saw_head(self, h):
        with self.lock:
            self.head = max(self.head, h)


def br15_writer(run, c):
    i = 0
    while i < run.n:
        try:
            r = c.append("tier/j", br15_record(i), timeout=30)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                run.transient += 1
                time.sleep(0.1)
                continue
            run.errors.append("writer: %s" % e)
            return
        if r.status == pb.INDEX_HAS_GREATER_OFFSET or r.status != pb.OK:
            run.errors.append("writer: append %d answered %s" % (i, pb.Status.Name(r.status)))
            return
        run.acked.append((r.commit.begin, r.commit.end, i))
        run.saw_head(r.commit.end)
        i += 1
        time.sleep(0.01)


def br15_tail_reader(run, c):
    """r1: a blocking reader from 0, resumed after transient errors."""
    while not (run.done.is_set() and len(run.r1) >= run.final):
        stream = run.r1_stream = c.read_stream("tier/j", offset=len(run.r1))
        try:
            for r in stream:
                if r.content:
                    if r.offset != len(run.r1):
                        run.errors.append("r1: chunk at %d, expected %d" % (r.offset, len(run.r1)))
                        return
                    run.r1 += r.content
                elif r.status != pb.OK or r.offset != len(run.r1):
                    run.errors.append("r1: %s at %d (asked %d)" % (pb.Status.Name(r.status), r.offset,
                                                                  len(run.r1)))
                    return
                if run.done.is_set() and len(run.r1) >= run.final:
                    stream.cancel()
                    return
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                grpc.StatusCode.DEADLINE_EXCEEDED):
                run.errors.append("r1: %s" % e)
                return
            run.transient += 1
            time.sleep(0.1)


def br15_random_reader(run, clients):
    """r2: every 2 s, a read at a random offset below a head already told."""
    rnd = random.Random(15)
    while not run.done.is_set():
        time.sleep(2)
        if run.head < 2:
            continue
        off = rnd.randrange(0, run.head)
        c = rnd.choice(clients)
        try:
            rs = c.read("tier/j", offset=off, end_offset=min(off + 65536, run.head), timeout=30)
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                run.errors.append("r2: %s" % e)
            run.transient += 1
            continue
        if not rs or rs[0].status != pb.OK or rs[0].offset != off:
            run.errors.append("r2: read at %d (head told %d) answered %s at %s" % (
                off, run.head, rs and pb.Status.Name(rs[0].status), rs and rs[0].offset))
            continue
        data = b"".join(r.content for r in rs)
        run.r2.append((off, data))


def test_BR15_readers_at_the_local_to_remote_hand_off(cluster, s3):
    """3 brokers; tier/j (replication 2, 64 KiB GZIP fragments, refresh 1 s)
    takes 1 KiB appends every 10 ms while three readers run; part way
    through, the primary is stopped (SIGTERM) and a replacement started.
    The run lasts GAZ_BR15_SECONDS of appends (default 45; the case says
    300)."""
    seconds = int(os.environ.get("GAZ_BR15_SECONDS", "45"))
    bucket = s3.new_bucket()
    url = s3.url(bucket, "tier/")
    brokers = [cluster.start(env=s3.env(), zone="z%d" % (i + 1)) for i in range(3)]
    c0 = Client(brokers[0].address)
    c0.apply(spec("tier/j", replication=2, stores=(url,), length=64 * 1024, codec=pb.GZIP, refresh_s=1))
    wait_assigned(c0, "tier/j")
    wait_for(lambda: len([x for x in c0.list() if x.spec.name == "tier/j"][0].route.members) == 2, 20,
             "both replicas")
    route = [x for x in c0.list() if x.spec.name == "tier/j"][0].route
    primary_id = route.members[route.primary].suffix
    members = {m.suffix for m in route.members}
    primary = [b for b in brokers if b.id == primary_id][0]
    service = [b for b in brokers if b.id not in members][0]  # never stopped
    run = Br15Run(seconds * 100)
    run.final = run.n * BR15_RECORD
    sc = Client(service.address)
    readers = [threading.Thread(target=br15_tail_reader, args=(run, sc)),
               threading.Thread(target=br15_random_reader,
                                args=(run, [sc] + [Client(b.address) for b in brokers if b is not primary]))]
    writer = threading.Thread(target=br15_writer, args=(run, sc))
    for t in readers + [writer]:
        t.start()
    # r3: our client library, do_not_proxy, fetching persisted fragments
    # from the bucket by signed URL.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_"))}
    env.update(PROBE_DO_NOT_PROXY="1", PROBE_CACHE="64")
    r3 = subprocess.Popen([PROBE, "read", service.address, "tier/j", "0", str(run.final)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    r3_out = []
    r3_reader = threading.Thread(target=lambda: r3_out.append(r3.communicate(timeout=seconds * 6 + 120)))
    r3_reader.start()
    try:
        wait_for(lambda: len(run.acked) >= run.n * 2 // 5 or run.errors, seconds * 3, "40% of the appends")
        assert primary.stop() == 0
        replacement = cluster.start(env=s3.env(), zone=primary.zone)
        writer.join(seconds * 6)
        assert not writer.is_alive() and len(run.acked) == run.n, run.errors
        run.done.set()
        # r1 has no end offset: once it holds everything, end its stream.
        wait_for(lambda: len(run.r1) >= run.final or run.errors, 120, "r1 to read the whole journal")
        run.r1_stream.cancel()
        for t in readers:
            t.join(120)
        r3_reader.join(seconds * 6 + 120)
    finally:
        run.done.set()
        if r3.poll() is None:
            r3.kill()
    assert not run.errors, run.errors[:10]
    # The history, from the replacement broker.
    rc = Client(replacement.address)
    head = write_head(rc, "tier/j")
    hist, _ = rc.read_bytes("tier/j", offset=0, end_offset=head)
    assert len(hist) == head >= run.n * BR15_RECORD
    for begin, end, i in run.acked:  # every acknowledged append, at its offsets
        assert hist[begin:end] == br15_record(i), (begin, end, i)
    assert [a[0] for a in run.acked] == sorted(a[0] for a in run.acked)
    assert hashlib.sha1(bytes(run.r1[:len(hist)])).hexdigest() == hashlib.sha1(hist[:len(run.r1)]).hexdigest()
    assert len(run.r1) >= run.n * BR15_RECORD
    for off, data in run.r2:
        assert hist[off:off + len(data)] == data, off
    assert len(run.r2) >= seconds // 4
    out, err = r3_out[0]
    assert r3.returncode == 0, err
    assert len(out) == run.n * BR15_RECORD and out == hist[:len(out)], err[-2000:]
    # Persisted history: what the bucket holds reads back directly, with
    # our client fetching signed URLs through the replacement broker.
    wait_for(lambda: max([f.end for f in persisted(rc, "tier/j")] or [0]) >= head - 2 * 65536, 60,
             "the history to reach the bucket")
    pend = max(f.end for f in persisted(rc, "tier/j"))
    env["PROBE_BLOCK"] = "0"
    p = subprocess.run([PROBE, "read", replacement.address, "tier/j", "0", str(pend)], capture_output=True,
                       env=env, timeout=300)
    assert p.returncode == 0 and p.stdout == hist[:pend], p.stderr[-2000:]


def test_BR15_a_read_at_an_index_hole_waits_for_the_listing_that_fills_it(cluster, s3):
    """The hand-off's hole, made exactly: the bucket holds [0,100) and
    [200,300) and the refresh interval is 5 minutes. A non-blocking read
    at 150 waits while the broker lists the bucket at a hurried pace; the
    missing fragment, put 1 s later, is read within seconds. A hole that
    stays ([300,400) below [400,500)) answers OFFSET_NOT_YET_AVAILABLE
    after the broker's 5 s wait, and blocking reads there go on waiting."""
    bucket = s3.new_bucket()
    parts = [bytes([65 + i]) * 100 for i in range(5)]

    def put(i):
        put_object(s3, bucket, "hole/hole/j/" + content_name(100 * i, parts[i], ".gz"),
                   gzip.compress(parts[i]))

    put(0), put(2)
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("hole/j", stores=(s3.url(bucket, "hole/"),), refresh_s=300, flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "hole/j")
    wait_for(lambda: c.read("hole/j", offset=0, end_offset=1)[0].status == pb.OK, 30, "the first listing")
    timer = threading.Timer(1.0, put, (1,))
    t0 = time.time()
    timer.start()
    got, last = c.read_bytes("hole/j", offset=150, timeout=30)
    took = time.time() - t0
    timer.join()
    assert got == b"B" * 50 + parts[2], (got, last)
    assert last.status == pb.OFFSET_NOT_YET_AVAILABLE and last.offset == 300
    assert 1.0 <= took < 4.0, took
    # A hole that stays.
    put(4)
    wait_for(lambda: c.read("hole/j", offset=-1, metadata_only=True)[-1].write_head == 500, 60,
             "the listing of [400,500)")
    t0 = time.time()
    rs = c.read("hole/j", offset=350, timeout=30)
    took = time.time() - t0
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE and rs[-1].offset == 350, rs[-1]
    assert 4.5 <= took < 15, took
    p = subprocess.Popen([PROBE, "read", b.address, "hole/j", "350", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=dict(os.environ, PROBE_CACHE="64"))
    time.sleep(7)
    assert p.poll() is None, p.communicate()
    p.kill()
    p.communicate()


# ---- BR-22 ----------------------------------------------------------------------------


LABELS = (("app", "pr"),)


def prune(s3, address, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_"))}
    env.update(s3.env(), BROKER_ADDRESS=address, HOME="/nonexistent",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    return subprocess.run([GAZCTL, "journals", "prune", "-l", "app=pr"] + list(args), capture_output=True,
                          text=True, env=env, timeout=120)


def summary(out, journal):
    m = re.search(r"^%s: (.*)$" % re.escape(journal), out, re.M)
    assert m, "no summary line for %s in:\n%s" % (journal, out)
    return m.group(1)


def prune_setup(cluster, s3, url):
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("pr/j", stores=(url,), length=1024, retention_s=1, labels=LABELS),
            spec("pr/full", stores=(url,), length=1024, labels=LABELS),
            spec("pr/zero", stores=(url,), length=1024, labels=LABELS))
    for name in ("pr/j", "pr/full", "pr/zero"):
        wait_assigned(c, name)
    c.append("pr/full", b"", suspend=pb.AppendRequest.SUSPEND_IF_FLUSHED)
    assert [j.spec.suspend.level for j in c.list() if j.spec.name == "pr/full"][0] == \
        pb.JournalSpec.Suspend.FULL
    for name in ("pr/j", "pr/zero"):
        for chunk in (b"a" * 1100, b"b" * 1100, b"c" * 50):  # two rolls
            assert c.append(name, chunk).status == pb.OK
        wait_for(lambda: len(persisted(c, name)) >= 2, 30, "%s to persist" % name)
    assert c.append("pr/j", b"spool-record\n").status == pb.OK
    return b, c


@pytest.mark.parametrize("deny", [False, True], ids=["delete-allowed", "delete-denied"])
def test_BR22_prune_on_s3(cluster, s3, deny):
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "pr/")
    b, c = prune_setup(cluster, s3, url)
    old = persisted(c, "pr/j")
    spool = [f.spec for f in c.fragments("pr/j").fragments if not f.spec.backing_store]
    assert len(spool) == 1 and spool[0].end == 2250 + 13
    j_keys, zero_keys = s3.keys(bucket, "pr/pr/j/"), s3.keys(bucket, "pr/pr/zero/")
    assert len(j_keys) == len(old) >= 2 and zero_keys
    time.sleep(2)
    p = prune(s3, b.address, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout, "pr/j").startswith("would prune %d fragments" % len(old))
    assert summary(p.stdout, "pr/full") == "skipped: journal is FULL-suspended"
    assert "retention unset: kept forever" in summary(p.stdout, "pr/zero")
    assert s3.keys(bucket, "pr/pr/j/") == j_keys and s3.keys(bucket, "pr/pr/zero/") == zero_keys
    assert not [m for m, _, _ in rec.seen if m == "DELETE"]
    rec.deny_delete = deny
    p = prune(s3, b.address)
    assert summary(p.stdout, "pr/full") == "skipped: journal is FULL-suspended"
    assert summary(p.stdout, "pr/zero").startswith("pruned 0 fragments (0 bytes)")
    assert s3.keys(bucket, "pr/pr/zero/") == zero_keys
    if deny:
        assert p.returncode == 1
        assert "AccessDenied" in p.stderr, p.stderr
        for k in j_keys:  # each fragment not removed is named
            assert os.path.basename(k) in p.stderr, (k, p.stderr)
        assert summary(p.stdout, "pr/j").startswith("pruned 0 fragments (0 bytes)")
        assert "failed %d fragments" % len(old) in summary(p.stdout, "pr/j")
        assert s3.keys(bucket, "pr/pr/j/") == j_keys
    else:
        assert p.returncode == 0, p.stderr
        assert summary(p.stdout, "pr/j").startswith("pruned %d fragments" % len(old))
        assert s3.keys(bucket, "pr/pr/j/") == []
    # The spool was never touched.
    got, _ = c.read_bytes("pr/j", offset=spool[0].begin)
    assert got.endswith(b"spool-record\n") and len(got) == spool[0].end - spool[0].begin
    rec.shutdown()
