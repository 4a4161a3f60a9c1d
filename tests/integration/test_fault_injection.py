"""One fault at a time into the spool and the persister of a real broker
(issue 31, item 3): a short write on the spool, EIO from fsync while the
file store persists a fragment, the spool directory removed under a
running broker, and an S3 store that stalls mid-upload. Each fault comes
once; each test checks the same four things:

  1. the failing operation answers with a clear error (a log line or the
     append's answer), or succeeds where the fault is transparent;
  2. nothing acknowledged is lost: the journal read back from 0 through
     the broker is byte-identical at every acknowledged offset, and the
     store's files (or objects) hold exactly their fragment's bytes;
  3. appends go on afterwards, without help;
  4. the broker never exits.

File faults come from tests/faultinject/gazfault.c, an LD_PRELOAD shim
armed through a control file (GAZ_FAULT_CTL); the store fault from
storeproxy.py, an HTTP proxy in front of the S3 server. The shim does not
load under the sanitizer builds (their runtimes must come first and
intercept the same calls): those two tests skip there, the others run."""
import gzip
import hashlib
import os
import re
import shutil
import stat
import time
from urllib.parse import quote

import pytest

import protocol_pb2 as pb
from conftest import BUILD, GAZETTE, ROOT, wait_for
from gazpb import Client, spec, wait_assigned
from storeproxy import StoreProxy

SHIM = os.path.join(ROOT, BUILD, "tests", "libgazfault.so")


def sanitized():
    """Whether our broker is a sanitizer build (ASan or TSan runtime in it)."""
    with open(GAZETTE, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


needs_shim = pytest.mark.skipif(
    sanitized(), reason="the LD_PRELOAD fault shim does not load under a sanitizer build "
                        "(its runtime must be first and intercepts the same calls); run it on build/")


def records(n, tag):
    return b"".join(b"%s%06d %s\n" % (tag, i, b"x" * (i * 37 % 500)) for i in range(n))


class Journal:
    """Appends to one journal and remembers every acknowledged byte at its
    acknowledged offset."""

    def __init__(self, client, name):
        self.c, self.name = client, name
        self.data = bytearray()

    def append(self, chunk, timeout=30):
        r = self.c.append(self.name, chunk, timeout=timeout)
        if r.status == pb.OK:
            assert r.commit.begin == len(self.data), (r.commit, len(self.data))
            assert r.commit.end == len(self.data) + len(chunk), (r.commit, len(self.data))
            self.data += chunk
        return r

    def append_ok(self, chunk, timeout=30):
        r = self.append(chunk, timeout)
        assert r.status == pb.OK, r
        return r

    def check_read_back(self):
        """Every acknowledged byte reads back identical from offset 0."""
        got, last = self.c.read_bytes(self.name, timeout=60)
        assert last is not None and last.write_head == len(self.data), (last, len(self.data))
        assert got == bytes(self.data), "journal %s differs from what was acknowledged" % self.name


def decode(name, body):
    return gzip.decompress(body) if name.endswith(".gz") else body


def store_files(root, journal):
    """{(begin, end): name} of the fragment files under a file store."""
    d = os.path.join(root, journal)
    out = {}
    for name in (os.listdir(d) if os.path.isdir(d) else []):
        m = re.match(r"([0-9a-f]{16})-([0-9a-f]{16})-([0-9a-f]{40})\.(raw|gz)$", name)
        if m:
            out[(int(m.group(1), 16), int(m.group(2), 16))] = name
    return out


def check_store_files(root, journal, data):
    """Each fragment file holds exactly data[begin:end] (by its SHA-1 name
    too); returns the offsets covered, as a sorted list of spans."""
    spans = store_files(root, journal)
    for (begin, end), name in spans.items():
        with open(os.path.join(root, journal, name), "rb") as f:
            body = decode(name, f.read())
        assert body == bytes(data[begin:end]), "store file %s differs from the acknowledged bytes" % name
        assert hashlib.sha1(body).hexdigest() == name.split("-")[2].split(".")[0]
    return sorted(spans)


def contiguous_to(spans, end):
    at = 0
    for b, e in spans:
        if b > at:
            return False
        at = max(at, e)
    return at >= end


def alive(b):
    assert b.proc.poll() is None, "broker exited %s:\n%s" % (b.proc.returncode, b.logtail())


def log(b):
    with open(b.logpath) as f:
        return f.read()


def shim_broker(cluster, tmp_path, extra_env=None):
    """A broker with the shim preloaded, its own TMPDIR (the spool
    directory) and an empty control file. Returns (broker, ctl path,
    spool dir)."""
    ctl = str(tmp_path / "fault.ctl")
    open(ctl, "w").close()
    spool = str(tmp_path / "spool")
    os.makedirs(spool)
    env = {"LD_PRELOAD": SHIM, "GAZ_FAULT_CTL": ctl, "TMPDIR": spool}
    env.update(extra_env or {})
    return cluster.start(env=env), ctl, spool


def arm(ctl, line):
    with open(ctl, "w") as f:
        f.write(line + "\n")


@needs_shim
def test_short_spool_write_is_transparent(cluster, tmp_path):
    """A pwrite into the spool that writes half of what it was asked is
    finished by the spool's write loop: the append succeeds, with the
    right offsets, and nothing is lost or doubled."""
    b, ctl, spool = shim_broker(cluster, tmp_path)
    c = Client(b.address)
    c.apply(spec("fi/short", length=64 * 1024))
    wait_assigned(c, "fi/short")
    j = Journal(c, "fi/short")
    j.append_ok(records(50, b"a"))
    arm(ctl, "pwrite short 1 %s/" % spool)
    j.append_ok(records(200, b"b"))
    fired = [ln for ln in log(b).splitlines() if ln.startswith("gazfault: pwrite short on %s/" % spool)]
    assert len(fired) == 1, log(b)[-3000:]
    assert "(deleted)" in fired[0]  # the O_TMPFILE spool itself
    j.check_read_back()
    for i in range(5):
        j.append_ok(records(30, b"c%d" % i))
    j.check_read_back()
    assert "spool write failed" not in log(b)
    alive(b)
    assert b.stop() == 0
    assert contiguous_to(check_store_files(cluster.file_root, "fi/short", j.data), len(j.data))


@needs_shim
def test_fsync_eio_while_persisting_is_retried(cluster, tmp_path):
    """fsync fails with EIO once while the file store persists a fragment:
    the persister logs the failure naming the file and the errno (text and
    symbol), keeps the fragment local (reads go on from it) and persists
    it on its next attempt, a second later."""
    b, ctl, spool = shim_broker(cluster, tmp_path)
    c = Client(b.address)
    c.apply(spec("fi/fsync", length=8 * 1024))
    wait_assigned(c, "fi/fsync")
    j = Journal(c, "fi/fsync")
    root = os.path.join(cluster.file_root, "fi", "fsync")
    arm(ctl, "fsync EIO 1 %s/" % root)
    for i in range(6):
        j.append_ok(records(30, b"f%d" % i))

    failed = wait_for(lambda: [ln for ln in log(b).splitlines() if "persisting fragment failed" in ln],
                      20, "the failed persist")
    assert len(failed) == 1, failed
    line = failed[0]
    assert "level=warning" in line and "journal=fi/fsync" in line, line
    assert re.search(r'fsync \\"%s/\.partial-[^"\\]+\\" failed: Input/output error \(EIO\)' % re.escape(root),
                     line), line
    assert "gazfault: fsync EIO on %s/.partial-" % root in log(b)
    begin, end = (int(x) for x in re.search(r"begin=(\d+) end=(\d+)", line).groups())
    # Meanwhile the local copy serves every byte.
    j.check_read_back()
    # Its retry (1 s later) persists it; no other attempt failed.
    wait_for(lambda: (begin, end) in store_files(cluster.file_root, "fi/fsync"), 20,
             "the fragment [%d, %d) persisted on its retry" % (begin, end))
    assert not any(n.startswith(".partial-") for n in os.listdir(root)), os.listdir(root)
    assert len([ln for ln in log(b).splitlines() if "persisting fragment failed" in ln]) == 1
    check_store_files(cluster.file_root, "fi/fsync", j.data)
    for i in range(3):
        j.append_ok(records(30, b"g%d" % i))
    j.check_read_back()
    alive(b)
    assert b.stop() == 0
    assert contiguous_to(check_store_files(cluster.file_root, "fi/fsync", j.data), len(j.data))


def test_spool_directory_removed_under_the_broker(cluster, tmp_path):
    """The spool directory ($TMPDIR) is removed while the broker runs, as a
    tmp cleaner would, twice. Open spools live on (their files are
    unlinked already). The first time, the next append needs a new spool
    file: it re-creates the directory (and its parent), 0700, with a
    warning that names it, and succeeds at once. The second time, nothing
    appends until the broker exits: its last fragment is persisted through
    a compressed copy, which re-creates the directory again."""
    spool = str(tmp_path / "tmp" / "spool")
    os.makedirs(spool)
    b = cluster.start(env={"TMPDIR": spool})
    c = Client(b.address)
    c.apply(spec("fi/rmdir", length=4 * 1024, codec=pb.GZIP))
    wait_assigned(c, "fi/rmdir")
    j = Journal(c, "fi/rmdir")
    warnings = lambda: [ln for ln in log(b).splitlines() if "spool directory was missing; re-created it" in ln]
    j.append_ok(records(40, b"a"))
    shutil.rmtree(str(tmp_path / "tmp"))
    # This append rolls the spool past its length: a new spool file.
    t0 = time.time()
    r = j.append(records(40, b"b"), timeout=15)
    took = time.time() - t0
    assert r.status == pb.OK, r
    assert took < 5, "the append waited %.1fs (a spool-write retry?)" % took
    assert len(warnings()) == 1, warnings()
    assert "level=warning" in warnings()[0] and "dir=%s " % spool in warnings()[0], warnings()
    assert stat.S_IMODE(os.stat(spool).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.dirname(spool)).st_mode) == 0o700
    for i in range(4):
        j.append_ok(records(40, b"c%d" % i))
    j.check_read_back()
    # Every rolled fragment persists, byte-identical.
    frags = lambda: [f.spec for f in c.fragments("fi/rmdir").fragments]
    wait_for(lambda: all(f.backing_store for f in frags()[:-1]), 20, "rolled fragments to persist")
    last_persisted = max(f.end for f in frags() if f.backing_store)
    assert contiguous_to(check_store_files(cluster.file_root, "fi/rmdir", j.data), last_persisted)
    assert "spool write failed" not in log(b) and "persisting fragment failed" not in log(b)
    j.append_ok(records(10, b"d"))  # an open spool with a file
    alive(b)

    # Again, and the first to need the directory is the exiting broker's
    # persister, compressing the last fragment.
    shutil.rmtree(str(tmp_path / "tmp"))
    assert b.stop() == 0
    assert len(warnings()) == 2, warnings()
    assert os.path.isdir(spool)
    assert "persisting fragment failed" not in log(b)
    assert contiguous_to(check_store_files(cluster.file_root, "fi/rmdir", j.data), len(j.data))


def test_s3_stall_mid_upload_is_cut_and_retried(cluster, s3, tmp_path):
    """The S3 server stops reading the first fragment upload mid-body
    (without answering or closing). With the store's stall timeout (our
    `stalltimeout` URL parameter, 2 s here, 60 s by default) the upload
    fails as stalled, is logged, and its retry lands, seconds rather than
    the 5-minute total later; appends go on meanwhile."""
    proxy = StoreProxy(s3.endpoint)
    try:
        bucket = s3.new_bucket()
        url = "s3://%s/st/?endpoint=%s&region=us-east-1&stalltimeout=2s" % (
            bucket, quote(proxy.endpoint, safe=""))
        b = cluster.start(env=s3.env())
        c = Client(b.address)
        c.apply(spec("fi/s3", stores=(url,), length=256 * 1024))
        wait_assigned(c, "fi/s3")
        j = Journal(c, "fi/s3")
        proxy.stall_puts(1, after=32 * 1024)
        for i in range(3):
            j.append_ok(records(700, b"s%d" % i))  # about 200 KB each: rolls
        wait_for(lambda: proxy.stalled, 20, "a fragment upload to stall")
        path, got, t_stall = proxy.stalled[0]
        # The broker carries on while its upload hangs.
        j.append_ok(records(100, b"during"))
        j.check_read_back()
        # The stalled PUT is cut and the same object is put again.
        retried = wait_for(lambda: [p for p in proxy.puts if p[0] == path and p[1] == 200], 30,
                           "the stalled upload's retry")
        # (curl averages over 5 s: cut 2 to 7 s after the last byte moved.)
        assert retried[0][2] - t_stall < 20, "the stall was cut after %.1fs" % (retried[0][2] - t_stall)
        line = [ln for ln in log(b).splitlines() if "retrying s3 request" in ln and "method=PUT" in ln]
        assert len(line) == 1, line
        assert "stalled: nothing sent or received for 2 s or more (stall timeout)" in line[0], line[0]
        assert "level=warning" in line[0] and path.split("/", 2)[2] in line[0], (path, line[0])
        # Every fragment rolled so far persists, byte-identical.
        frags = lambda: [f.spec for f in c.fragments("fi/s3").fragments]
        wait_for(lambda: all(f.backing_store for f in frags()[:-1]), 30, "rolled fragments to persist")
        cl = s3.client()
        for f in frags():
            if f.backing_store:
                key = "st/fi/s3/%016x-%016x-" % (f.begin, f.end)
                keys = [k for k in s3.keys(bucket, "st/fi/s3/") if k.startswith(key)]
                assert len(keys) == 1, (key, keys)
                body = cl.get_object(Bucket=bucket, Key=keys[0])["Body"].read()
                assert body == bytes(j.data[f.begin:f.end])
        assert len(proxy.stalled) == 1
        j.append_ok(records(50, b"after"))
        j.check_read_back()
        alive(b)
    finally:
        proxy.close()


@needs_shim
def test_delete_probe_writes_no_local_file(cluster, tmp_path):
    """FragmentStoreHealth's delete probe PUTs its body from memory, as
    Gazette's does: with /tmp and $TMPDIR full (every write there fails
    with ENOSPC) and room in the store, the probe still passes."""
    b, ctl, spool = shim_broker(cluster, tmp_path)
    c = Client(b.address)
    health = c.ch.unary_unary("/protocol.Journal/FragmentStoreHealth",
                              pb.FragmentStoreHealthRequest.SerializeToString,
                              pb.FragmentStoreHealthResponse.FromString)
    with open(ctl, "w") as f:
        f.write("write ENOSPC 1000 /tmp/gaz\nwrite ENOSPC 1000 %s\n" % spool)
    r = health(pb.FragmentStoreHealthRequest(fragment_store="file:///", check_delete=True,
                                             check_delete_prefix="probe/"), timeout=30)
    assert r.status == pb.OK, r.store_health_error
    open(ctl, "w").close()
    alive(b)
    c.close()
