"""Bad input gets a clear error and loses nothing."""
import os
import shutil
import signal
import subprocess
import time

import grpc
import pytest

import protocol_pb2 as pb
from conftest import Etcd, free_port, wait_for
from gazpb import Client, spec


@pytest.fixture
def one(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("bad/j"))
    assert c.append("bad/j", b"kept").status == pb.OK
    yield cluster, b, c
    # Whatever happened, the committed bytes are still there.
    assert c.read_bytes("bad/j")[0].startswith(b"kept")
    c.close()


def raw(c, method, kind):
    ident = lambda x: x  # noqa: E731
    return getattr(c.ch, kind)(method, request_serializer=ident, response_deserializer=ident)


def test_malformed_protobuf(one):
    cluster, b, c = one
    junk = b"\xff\xff\xff\xff\x0f\x12"
    with pytest.raises(grpc.RpcError) as e:
        list(raw(c, "/protocol.Journal/Read", "unary_stream")(junk, timeout=5))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        raw(c, "/protocol.Journal/Append", "stream_unary")(iter([junk]), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        raw(c, "/protocol.Journal/Apply", "unary_unary")(junk, timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_method(one):
    cluster, b, c = one
    t0 = time.time()
    with pytest.raises(grpc.RpcError) as e:
        raw(c, "/protocol.Journal/NoSuchMethod", "unary_unary")(b"", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert time.time() - t0 < 5


def test_oversized_message(one):
    cluster, b, c = one
    big = b"x" * (5 << 20)  # over --broker.max-grpc-recv-size (4 MiB)

    def gen():
        yield pb.AppendRequest(journal="bad/j")
        yield pb.AppendRequest(content=big)
        yield pb.AppendRequest()
    with pytest.raises(grpc.RpcError) as e:
        c._append(gen(), timeout=10)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert c.read_bytes("bad/j")[0] == b"kept"


@pytest.mark.parametrize("journal", ["", "abc", "/abs/path", "a//b", "a/b/", "a b/c", "a/../b"])
def test_invalid_journal_names_in_requests(one, journal):
    cluster, b, c = one
    with pytest.raises(grpc.RpcError) as e:
        c.read(journal)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    if journal:
        with pytest.raises(grpc.RpcError) as e:
            c.append(journal, b"x")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_invalid_selectors_and_requests(one):
    cluster, b, c = one
    sel = pb.LabelSelector()
    sel.include.labels.add(name="prefix", value="no-trailing-slash")
    with pytest.raises(grpc.RpcError) as e:
        c.list(sel)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        c.read("bad/j", offset=-2)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        c.fragments("bad/j", page_limit=10001)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Content in the first Append message is a protocol violation.
    with pytest.raises(grpc.RpcError) as e:
        c._append(iter([pb.AppendRequest(journal="bad/j", content=b"x")]), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_foreign_and_truncated_files_in_store_are_skipped(one):
    cluster, b, c = one
    d = os.path.join(cluster.file_root, "bad/j")
    os.makedirs(os.path.join(d, "subdir"), exist_ok=True)
    open(os.path.join(d, "README.txt"), "w").write("not a fragment")
    open(os.path.join(d, "0000000000000000-000000000000000a-zz.raw"), "w").write("bad sum")
    # A zero-length object of a non-empty fragment: an interrupted upload.
    open(os.path.join(d, "0000000000001000-0000000000002000-" + "ab" * 20 + ".raw"), "w").close()
    time.sleep(2.5)  # two refresh intervals
    frags = c.fragments("bad/j").fragments
    assert all(f.spec.end <= 4 for f in frags), [str(f.spec) for f in frags]
    log = open(b.logpath).read()
    assert "README.txt" in log
    assert c.append("bad/j", b"+more").status == pb.OK


def test_etcd_down_at_start_then_up(cluster, tmp_path):
    """A broker started before its etcd logs a clear error, retries, and
    comes up once etcd does; no crash."""
    dead = "http://127.0.0.1:%d" % free_port()
    b = cluster.start(wait=False, etcd_endpoint=dead)
    time.sleep(3)
    assert b.proc.poll() is None, b.logtail()
    assert "etcd is unavailable" in open(b.logpath).read()
    b.signal(signal.SIGTERM)
    assert b.proc.wait(20) != 0  # it never served; says so and exits
    b.check_sanitizers()
    assert "signalled while waiting for etcd" in open(b.logpath).read()


def test_unusable_store_answers_unhealthy_instead_of_hanging(one):
    """A journal whose store cannot be used (an S3 store with neither
    credentials nor a region in the broker's environment) answers
    FRAGMENT_STORE_UNHEALTHY; reads of its live spool still work; nothing
    hangs."""
    cluster, b, c = one
    c.apply(spec("bad/s3", stores=("s3://bucket/prefix/",)))
    t0 = time.time()
    r = c.append("bad/s3", b"x")
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY and "s3://bucket/prefix/" in r.store_health_error
    assert time.time() - t0 < 10
    rs = c.read("bad/s3", timeout=10)
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE
    # The refresh is retried, but not in a tight loop.
    time.sleep(2)
    assert open(b.logpath).read().count("fragment index refresh failed") < 4
