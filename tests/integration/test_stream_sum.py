"""stream-sum's chunker in C (examples/stream-sum/chunker.c, bin/stream-sum-
chunker) against Gazette's own summer consumer on our brokers: every
stream's final sum verified; Gazette's chunker and ours side by side
against the same summers; and a sums journal holding lines that are not
JSON or carry no UUID, which our chunker skips with a warning.

One cluster for the module (examples_env.py): etcd, three of our brokers,
the examples' journals and Gazette's summer shards as tests/soak/soak.py
makes them, every store SQLite, and two summers (primary and hot
standby)."""
import base64
import json
import os
import re
import struct
import subprocess
import threading
import time
import uuid

import pytest

import conftest as cf
from examples_env import EXAMPLES, Env
from gazpb import Client, spec, wait_route

CHUNKER = os.path.join(cf.BIN, "stream-sum-chunker")
GO_CHUNKER = os.path.join(EXAMPLES, "chunker")
SUMS = "examples/stream-sum/sums"
SUMMARY = re.compile(r"stream-sum-chunker: verified (\d+) streams, published (\d+) chunks; the sums reader "
                     r"dropped (\d+) duplicates and skipped (\d+) frames; (\d+) duplicate sums")


@pytest.fixture(scope="module")
def env(etcd, tmp_path_factory):
    e = Env(etcd, str(tmp_path_factory.mktemp("stream-sum")), "summer")
    yield e
    e.stop()


def chunker_args(env, exe, workers=3, streams=20, chunks=30):
    return [exe, "run", "--chunker.zone", "local", "--chunker.workers", str(workers),
            "--chunker.streams", str(streams), "--chunker.chunks", str(chunks),
            # No route cache: with one, a chunker would read persisted
            # fragments itself, and it has no file:// root (soak.py).
            "--broker.address", env.broker.address, "--broker.cache.size", "0", "--log.level", "info"]


def start_chunker(env, exe, name, **kw):
    """Starts a chunker; Gazette's holds cf.GazetteDiagnosticsPort until
    finish() (its diagnostics bind :8080)."""
    lock = cf.GazetteDiagnosticsPort() if exe == GO_CHUNKER else None
    log = open(os.path.join(env.dir, name + ".log"), "w")
    penv = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "CHUNKER_"))}
    try:
        p = subprocess.Popen(chunker_args(env, exe, **kw), stdout=subprocess.PIPE, stderr=log, env=penv, text=True)
    except BaseException:
        if lock:
            lock.release()
        raise
    p.logpath, p.port_lock = log.name, lock
    log.close()
    return p


def finish(p, timeout=240):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    finally:
        if p.port_lock:
            p.port_lock.release()
    return p.returncode, out, open(p.logpath, errors="replace").read()


def check_ours(rc, out, log, streams):
    for m in cf.SAN_MARKERS:
        assert m not in log, "sanitizer report:\n" + log[log.index(m) - 200:][:4000]
    assert rc == 0, "chunker exited %s:\n%s\n%s" % (rc, out, log[-4000:])
    m = SUMMARY.search(out)
    assert m, out
    verified, chunks, dropped, skipped, dups = (int(x) for x in m.groups())
    assert verified == streams, out
    assert dups == 0, out
    return verified, chunks, dropped, skipped


def test_our_chunker_with_gazettes_summer(env):
    p = start_chunker(env, CHUNKER, "ours-a")
    rc, out, log = finish(p)
    verified, chunks, _, skipped = check_ours(rc, out, log, 3 * 20)
    # Each stream: 30 chunks of data and an empty last one.
    assert chunks == 3 * 20 * 31, out
    assert skipped == 0, out
    env.check_consumers()


def test_gazettes_chunker_and_ours_side_by_side(env):
    go = start_chunker(env, GO_CHUNKER, "go-b", workers=2, streams=15, chunks=20)
    ours = start_chunker(env, CHUNKER, "ours-b")
    rc, out, log = finish(ours)
    grc, _, glog = finish(go)
    check_ours(rc, out, log, 3 * 20)
    fatal = [ln for ln in glog.splitlines() if "level=fatal" in ln or "panic" in ln]
    assert grc == 0, "Gazette's chunker exited %s: %s" % (grc, "\n".join(fatal) or glog[-3000:])
    env.check_consumers()


def test_bad_lines_in_the_sums_journal_are_skipped(env):
    """A line that is not JSON, a Sum without a UUID, a Sum whose Value is
    not a number, and a stranger's well-formed Sum with a Value above
    INT64_MAX, all written after the chunker's barrier: the first three
    are skipped with a warning, the fourth read and ignored, and every
    stream still verifies."""
    c = Client(env.broker.address)
    c.read_bytes(SUMS)  # connected before the chunker starts: the lines go in early
    p = start_chunker(env, CHUNKER, "ours-c", streams=40)
    cf.wait_for(lambda: "starting chunker" in open(p.logpath).read() or p.poll() is not None, 60,
                "the chunker's barrier", interval=0.01)
    barrier = int(re.search(r"barrier=(\d+)", open(p.logpath).read()).group(1))
    ident = ",".join(["7"] * 16)
    r = c.append(SUMS, [b"this is not json\n",
                        b'{"ID":[%s],"SeqNo":31,"Value":1}\n' % ident.encode(),
                        b'{"UUID":"4d5e6f7a-2b3c-11ed-8400-010203040506","ID":[%s],"SeqNo":31,"Value":"x"}\n'
                        % ident.encode(),
                        b'{"UUID":"4d5e6f7a-2b3c-11ed-8400-0b0203040506","ID":[%s],"SeqNo":31,'
                        b'"Value":18446744073709551615}\n' % ident.encode()])
    assert r.status == 0 and r.commit.begin >= barrier, r
    rc, out, log = finish(p)
    # The run read past the lines only if some sum of it came after them.
    data, _ = c.read_bytes(SUMS, r.commit.end)
    c.close()
    assert data.count(b'"Value"') > 0, "the run ended before the bad lines were appended"
    _, _, _, skipped = check_ours(rc, out, log, 3 * 40)
    assert skipped == 3, out
    assert log.count("skipping a message that does not decode") == 3, log[-4000:]
    assert "message has no UUID" in log, log[-4000:]
    env.check_consumers()


def test_usage_and_config(env):
    r = subprocess.run([CHUNKER, "print-config", "--chunker.workers", "7"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "[Chunker]" in r.stdout and "Workers = 7" in r.stdout, r.stdout
    r = subprocess.run([CHUNKER, "run", "--chunker.bogus", "1"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown flag" in r.stderr, r.stderr
    r = subprocess.run([CHUNKER], capture_output=True, text=True)
    assert r.returncode == 2 and "run" in r.stderr, r.stderr


# ---- a wrong sum, from a summer of the test's own ------------------------------------


def crc64_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xC96C5795D7870F42 if c & 1 else c >> 1
        t.append(c)
    return t


CRC = crc64_table()


def crc64(crc, data):
    """Go's crc64.Update with the ECMA table."""
    crc ^= 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc = CRC[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


class FakeSummer(threading.Thread):
    """Sums the chunk journals itself (Python's json and base64, a third
    reading of our Chunks) and writes each final sum committed
    (OUTSIDE_TXN) to the sums journal, the Value of the `wrong`-th one off
    by one."""

    def __init__(self, address, parts, wrong):
        super().__init__(daemon=True)
        self.c, self.parts, self.wrong = Client(address), parts, wrong
        self.stop = threading.Event()
        self.sums, self.written = {}, 0
        self.clock = ((time.time_ns() // 100) + 122192928000000000) << 4

    def uuid(self):
        self.clock += 160  # Gazette's Clock.Tick
        c, f = self.clock, 0  # OUTSIDE_TXN
        b = struct.pack(">IHHH", (c >> 4) & 0xFFFFFFFF, (c >> 36) & 0xFFFF, ((c >> 52) & 0x0FFF) | 0x1000,
                        ((c << 10) & 0x3C00) | f | 0x8000) + bytes([0x03, 1, 2, 3, 4, 5])
        return str(uuid.UUID(bytes=b))

    def run(self):
        offsets = dict.fromkeys(self.parts, 0)
        while not self.stop.is_set():
            for j in self.parts:
                data, _ = self.c.read_bytes(j, offsets[j])
                end = data.rfind(b"\n") + 1
                offsets[j] += end
                for line in data[:end].splitlines():
                    self.fold(json.loads(line))
            time.sleep(0.02)

    def fold(self, chunk):
        sid = bytes(chunk["ID"])
        seq, value = self.sums.get(sid, (0, 0))
        assert chunk["SeqNo"] == seq + 1, chunk
        data = base64.b64decode(chunk["Data"]) if chunk["Data"] is not None else b""
        value = crc64(value, data)
        self.sums[sid] = (chunk["SeqNo"], value)
        if data:
            return
        self.written += 1
        if self.written == self.wrong:
            value = (value + 1) & 0xFFFFFFFFFFFFFFFF
        line = json.dumps({"UUID": self.uuid(), "ID": list(sid), "SeqNo": chunk["SeqNo"], "Value": value},
                          separators=(",", ":")) + "\n"
        r = self.c.append(SUMS, [line.encode()])
        assert r.status == 0, r


def test_a_wrong_sum_fails_the_run(cluster):
    b = cluster.start()
    c = Client(b.address)
    parts = ["examples/stream-sum/chunks/part-%03d" % i for i in range(2)]
    ndjson = ("content-type", "application/x-ndjson")
    c.apply(*[spec(j, labels=[("app.gazette.dev/message-type", "stream_sum.Chunk"), ndjson]) for j in parts],
            spec(SUMS, labels=[ndjson]))
    for j in parts + [SUMS]:
        wait_route(c, j, 1)
    fake = FakeSummer(b.address, parts, wrong=5)
    fake.start()
    try:
        p = subprocess.run([CHUNKER, "run", "--chunker.workers", "1", "--chunker.streams", "10",
                            "--chunker.chunks", "3", "--broker.address", b.address],
                           capture_output=True, text=True, timeout=120)
    finally:
        fake.stop.set()
        fake.join(10)
    assert p.returncode == 1, p.stdout + p.stderr
    m = SUMMARY.search(p.stdout)
    assert m and int(m.group(1)) == 4, p.stdout  # the four before the wrong one
    assert "level=fatal" in p.stderr and "mis-matched sum of stream" in p.stderr, p.stderr
    for mark in cf.SAN_MARKERS:
        assert mark not in p.stderr, p.stderr
