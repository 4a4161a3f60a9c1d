"""The s3:// fragment store against a real S3 server (SeaweedFS, started by
conftest's `s3` fixture or named by GAZ_TEST_S3), with boto3 as an
independent S3 client: persistence and read-back across a broker restart
on an empty disk, signed URLs and direct reads (ours and Gazette's gazctl),
listing past 1,000 objects with junk keys (BR-11), unhealthy stores that
recover (BR-20) through the store's periodic health checks, store
metrics, retries through SlowDown, an outage that ends, resumed GETs,
multipart uploads, path postfix templates and BR-09's signed URLs, and
buckets shared with Gazette's own Go broker in both directions for every
codec. Faults are injected by a recording loopback proxy in
front of the real server."""
import gzip
import hashlib
import http.client
import http.server
import os
import re
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.protobuf import duration_pb2

import protocol_pb2 as pb
from conftest import GAZCTL, GO_GAZCTL, wait_for
from gazpb import Client, spec, wait_assigned


def gazctl(exe, address, *args, check=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_"))}
    env["BROKER_ADDRESS"] = address
    env["HOME"] = "/nonexistent"
    try:
        p = subprocess.run([exe] + list(args), capture_output=True, env=env, timeout=120)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("%s %s timed out: %s" % (exe, args, (e.stderr or b"")[-3000:].decode(errors="replace")))
    if check and p.returncode != 0:
        raise AssertionError("%s %s failed (%d): %s" % (exe, args, p.returncode, p.stderr.decode()))
    return p


def health(client, url, **kw):
    fn = client.ch.unary_unary("/protocol.Journal/FragmentStoreHealth",
                               pb.FragmentStoreHealthRequest.SerializeToString,
                               pb.FragmentStoreHealthResponse.FromString)
    return fn(pb.FragmentStoreHealthRequest(fragment_store=url, **kw), timeout=90)


def reapply(client, s):
    """Upserts an existing journal's spec (at its current mod revision)."""
    rev = [j.mod_revision for j in client.list() if j.spec.name == s.name][0]
    assert client.apply(s, expect=rev).status == pb.OK


def persisted(client, journal):
    return [f.spec for f in client.fragments(journal).fragments if f.spec.backing_store]


def sum_hex(f):
    return struct.pack(">QQI", f.sum.part1, f.sum.part2, f.sum.part3).hex()


def object_key(prefix, f, ext):
    return "%s%s/%016x-%016x-%s%s" % (prefix, f.journal, f.begin, f.end, sum_hex(f), ext)


def records(n, tag=b"r"):
    return b"".join(b"%s%08d %s\n" % (tag, i, b"x" * (i % 113)) for i in range(n))


def append_all(client, journal, data, chunk=64 * 1024):
    for i in range(0, len(data), chunk):
        r = client.append(journal, data[i:i + chunk])
        assert r.status == pb.OK, r


def test_s3_persist_restart_and_read_back(cluster, s3):
    """Fragments persist to s3://bucket/prefix/ with Gazette's key layout
    and names; after a graceful stop, a broker with an empty scratch disk
    serves every byte back from the bucket and appends continue."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "pre/fix/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("s3/a", stores=(url,), length=64 * 1024, codec=pb.GZIP))
    wait_assigned(c, "s3/a")
    data = records(20000)
    append_all(c, "s3/a", data)
    # Rolled fragments persist while the broker runs.
    wait_for(lambda: len(persisted(c, "s3/a")) >= 3, 30, "fragments persisted to S3")
    # Listed as persisted first, then the bucket: every fragment the broker
    # calls persisted must be there (more may land meanwhile).
    frags = persisted(c, "s3/a")
    keys = set(s3.keys(bucket))
    for f in frags:
        assert f.backing_store == url
        assert object_key("pre/fix/", f, ".gz") in keys
    assert b.stop() == 0
    # Every byte is now in the bucket, as gzip objects under the prefix.
    spans = []
    cl = s3.client()
    # (The store's health checks keep their probe under pre/fix/.test/.)
    assert [k for k in s3.keys(bucket) if not k.startswith("pre/fix/.test/")] == s3.keys(bucket, "pre/fix/s3/a/")
    for k in s3.keys(bucket, "pre/fix/s3/a/"):
        assert k.endswith(".gz"), k
        begin, end, digest = os.path.basename(k)[:-3].split("-")
        body = gzip.decompress(cl.get_object(Bucket=bucket, Key=k)["Body"].read())
        assert hashlib.sha1(body).hexdigest() == digest
        spans.append((int(begin, 16), int(end, 16), body))
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    assert b"".join(s[2] for s in spans) == data
    # A new broker (new id, new empty scratch dir) reads it all back.
    b2 = cluster.start(env=s3.env())
    c2 = Client(b2.address)
    wait_assigned(c2, "s3/a")
    got, last = c2.read_bytes("s3/a")
    assert got == data and last.write_head == len(data)
    r = c2.append("s3/a", b"after restart\n")
    assert r.status == pb.OK and r.commit.begin == len(data)


def store_read_threads(pid):
    """Nice values of the broker's gaz-store-read threads now."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        name, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        if name == "gaz-store-read":
            out.append(int(rest[16]))  # field 19, nice
    return out


def test_s3_proxied_reads_on_niced_threads(cluster, s3):
    """With --broker.store-read-nice, a proxied read of a persisted
    fragment streams from a thread of its own at that niceness (the
    handler threads, which serve appends too, keep theirs), and every byte
    arrives as without it; appends meanwhile commit."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "nice/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("s3/nice", stores=(url,), length=256 * 1024, codec=pb.SNAPPY))
    wait_assigned(c, "s3/nice")
    data = records(60000)
    append_all(c, "s3/nice", data)
    assert b.stop() == 0  # everything persisted; the next broker reads the bucket
    b2 = cluster.start(env=s3.env(), extra=["--broker.store-read-nice", "10"])
    c2 = Client(b2.address)
    wait_assigned(c2, "s3/nice")
    seen, stop = set(), threading.Event()

    def sample():
        while not stop.is_set():
            seen.update(store_read_threads(b2.proc.pid))
            time.sleep(0.0005)

    t = threading.Thread(target=sample)
    t.start()
    try:
        deadline = time.time() + 20
        while not seen and time.time() < deadline:
            got, last = c2.read_bytes("s3/nice")
            assert got == data and last.write_head == len(data)
            r = c2.append("s3/nice", b"")
            assert r.status == pb.OK
    finally:
        stop.set()
        t.join()
    assert seen == {10}
    handler_nices = set()
    for tid in os.listdir("/proc/%d/task" % b2.proc.pid):
        with open("/proc/%d/task/%s/stat" % (b2.proc.pid, tid)) as f:
            st = f.read()
        handler_nices.add(int(st[st.rindex(")") + 2:].split()[16]))
    assert handler_nices == {0}


class Recorder(http.server.ThreadingHTTPServer):
    """A loopback HTTP proxy in front of the S3 server that records each
    request: (method, path, signed by query string?). Host is forwarded
    unchanged, so SigV4 signatures made for the proxy's address verify."""
    daemon_threads = True

    def __init__(self, target):
        self.target = target.replace("http://", "")
        self.seen = []
        self.fail_next = 0      # answer this many requests 503 SlowDown
        self.outage = False     # answer every request 503 SlowDown
        self.cut_next_get = 0   # end the next object GET's body after this many bytes
        self.fail_next_get = 0  # answer this many object GETs 503 SlowDown
        self.ranges = []        # Range headers of object GETs
        self.deny_delete = False  # answer DELETEs 403 AccessDenied (a bucket policy)
        self.refuse_put = {}    # bucket -> status (403 AccessDenied, 503 SlowDown) for its fragment
        #                         PUTs (not the store health check's .test/ objects)
        self.hold = {}          # path suffix -> seconds to hold the next signed GET of it
        self.transcode = False  # decode gzip objects for GETs that do not accept gzip
        super().__init__(("127.0.0.1", 0), RecorderHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class RecorderHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        self.server.seen.append((self.command, self.path.split("?")[0], "X-Amz-Signature=" in self.path))
        if self.command == "DELETE" and self.server.deny_delete:
            return self.refuse(403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
        status = "/.test/" not in self.path and self.server.refuse_put.get(self.path.split("?")[0].split("/")[1])
        if self.command == "PUT" and status == 403:
            return self.refuse(403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
        if self.command == "PUT" and status == 503:
            return self.refuse(503, b"<Error><Code>SlowDown</Code><Message>Please reduce your request "
                                    b"rate.</Message></Error>")
        for suffix, secs in list(self.server.hold.items()):
            if self.command == "GET" and "X-Amz-Signature=" in self.path and \
                    self.path.split("?")[0].endswith(suffix):
                del self.server.hold[suffix]
                time.sleep(secs)
        object_get = self.command == "GET" and "?" not in self.path and "/.test/" not in self.path
        if object_get and self.server.fail_next_get > 0:
            self.server.fail_next_get -= 1
            self.server.ranges.append(self.headers.get("Range"))
            return self.refuse(503, b"<Error><Code>SlowDown</Code><Message>Please reduce your request "
                                    b"rate.</Message></Error>")
        if self.server.outage or self.server.fail_next > 0:
            self.server.fail_next -= 1
            err = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Length", str(len(err)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(err)
            return
        conn = http.client.HTTPConnection(self.server.target, timeout=60)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        headers = resp.getheaders()
        if self.server.transcode and resp.getheader("Content-Encoding") == "gzip" and \
                "gzip" not in (self.headers.get("Accept-Encoding") or ""):
            data = gzip.decompress(data)  # as GCS does for objects stored with gzip encoding
            headers = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
        cut = 0
        if object_get:
            self.server.ranges.append(self.headers.get("Range"))  # fragment GETs, not health probes
            cut, self.server.cut_next_get = self.server.cut_next_get, 0
        self.send_response(resp.status)
        for k, v in headers:
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if cut:
            self.wfile.write(data[:cut])  # then drop the connection
            self.close_connection = True
        elif self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    def refuse(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


def test_s3_signed_urls_and_direct_reads(cluster, s3):
    """ListFragments signs GETs that fetch the exact objects; a Read with
    do_not_proxy answers a fragment_url; our gazctl and Gazette's gazctl
    read persisted fragments straight from the bucket with those URLs
    (seen as query-signed GETs at a recording proxy), while a proxied Read
    has the broker fetch them with its own credentials."""
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    from urllib.parse import quote
    url = "s3://%s/signed/?endpoint=%s&region=us-east-1" % (bucket, quote(rec.endpoint, safe=""))
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("s3/b", stores=(url,), length=8 * 1024, codec=pb.GZIP))
    wait_assigned(c, "s3/b")
    data = records(2000, b"b")
    append_all(c, "s3/b", data, chunk=10 * 1024)
    wait_for(lambda: len(persisted(c, "s3/b")) >= 3, 30, "fragments persisted")
    # A broker with an empty disk: every fragment is in the bucket only.
    assert b.stop() == 0
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "s3/b")
    r = c.fragments("s3/b", signatureTTL=duration_pb2.Duration(seconds=600))
    signed = [f for f in r.fragments if f.spec.backing_store]
    assert len(signed) >= 3
    for f in signed:
        assert f.signed_url.startswith("%s/%s/signed/s3/b/%016x-" % (rec.endpoint, bucket, f.spec.begin))
        assert "X-Amz-Expires=600" in f.signed_url and "X-Amz-SignedHeaders=host" in f.signed_url
        body = urllib.request.urlopen(f.signed_url, timeout=30).read()
        assert gzip.decompress(body) == data[f.spec.begin:f.spec.end]
        # A tampered signature is refused by the server.
        bad = f.signed_url[:-4] + ("0000" if not f.signed_url.endswith("0000") else "1111")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(bad, timeout=30)
        assert e.value.code == 403
    first = signed[0].spec
    # Read with do_not_proxy: metadata with the URL, no content.
    rs = c.read("s3/b", offset=0, do_not_proxy=True)
    assert rs[0].status == pb.OK and rs[0].fragment.backing_store == url and rs[0].fragment_url
    assert not any(x.content for x in rs)
    assert gzip.decompress(urllib.request.urlopen(rs[0].fragment_url, timeout=30).read()) == \
        data[first.begin:first.end]
    # Both gazctls fetch fragments directly with the signed URLs.
    for exe in (GAZCTL, GO_GAZCTL):
        rec.seen.clear()
        out = gazctl(exe, b.address, "journals", "read", "--broker.cache.size", "256", "-l", "name=s3/b").stdout
        assert out == data, exe
        direct = [p for m, p, q in rec.seen if m == "GET" and q]
        assert "/%s/%s" % (bucket, object_key("signed/", first, ".gz")) in direct, (exe, rec.seen)
        assert not [p for m, p, q in rec.seen if m == "GET" and not q and "/s3/b/" in p], exe
    # A proxied Read: the broker GETs the objects itself (header-signed).
    rec.seen.clear()
    got, _ = c.read_bytes("s3/b")
    assert got == data
    assert [p for m, p, q in rec.seen if m == "GET" and not q and p.endswith(".gz")]
    rec.shutdown()


def snappy_unframe(data):
    """Decodes the snappy framing format (github.com/google/snappy
    framing_format.txt) without a snappy library: an independent reader of
    what the broker uploads for SNAPPY. CRCs are not checked."""
    out, i = bytearray(), 0
    while i < len(data):
        kind, n = data[i], int.from_bytes(data[i + 1:i + 4], "little")
        body, i = data[i + 4:i + 4 + n], i + 4 + n
        if kind == 0xFF:
            assert body == b"sNaPpY", body
        elif kind == 0x01:
            out += body[4:]
        elif kind == 0x00:
            out += snappy_block(body[4:])
        else:
            assert 0x80 <= kind <= 0xFE, kind  # skippable
    return bytes(out)


def snappy_block(b):
    n, shift, i = 0, 0, 0
    while True:
        n |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            break
    out = bytearray()
    while i < len(b):
        tag = b[i]
        i += 1
        if tag & 3 == 0:
            ln = tag >> 2
            if ln >= 60:
                k = ln - 59
                ln = int.from_bytes(b[i:i + k], "little")
                i += k
            out += b[i:i + ln + 1]
            i += ln + 1
            continue
        if tag & 3 == 1:
            ln, off = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | b[i]
            i += 1
        elif tag & 3 == 2:
            ln, off = (tag >> 2) + 1, int.from_bytes(b[i:i + 2], "little")
            i += 2
        else:
            ln, off = (tag >> 2) + 1, int.from_bytes(b[i:i + 4], "little")
            i += 4
        for _ in range(ln):
            out.append(out[-off])
    assert len(out) == n
    return bytes(out)


DATE_TEMPLATE = 'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}'


@pytest.mark.parametrize("rewrite", [False, True], ids=["plain", "find-replace"])
def test_BR09_signed_url_names_the_stored_object(cluster, s3, rewrite):
    """Prefix, path postfix (a date partition from path_postfix_template)
    and a find/replace rewrite: the object key, the listing and the signed
    URL name the same object, the prefix exactly once, and the fragment is
    still reported for its journal with its postfix. Gazette's gazctl
    reads it by that URL too."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "deep/pre/fix/", **({"find": "url/a/", "replace": "old/"} if rewrite else {}))
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    s = spec("url/a/b", stores=(url,), length=1024, codec=pb.SNAPPY)
    s.fragment.path_postfix_template = DATE_TEMPLATE
    c.apply(s)
    wait_assigned(c, "url/a/b")
    data = os.urandom(2048) + b"text " * 400
    t0 = time.gmtime()
    assert c.append("url/a/b", data).status == pb.OK
    assert b.stop() == 0
    t1 = time.gmtime()
    dates = {time.strftime("%Y-%m-%d", t) for t in (t0, t1)}
    keys = [k for k in s3.keys(bucket) if not k.startswith("deep/pre/fix/.test/")]  # health probes
    name = "0000000000000000-%016x-%s.sz" % (len(data), hashlib.sha1(data).hexdigest())
    base = "deep/pre/fix/old/b/" if rewrite else "deep/pre/fix/url/a/b/"
    assert len(keys) == 1 and keys[0] in ["%sdate=%s/%s" % (base, d, name) for d in dates], keys
    postfix = keys[0][len(base):-len(name) - 1]
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "url/a/b")
    r = c.fragments("url/a/b", signatureTTL=duration_pb2.Duration(seconds=600))
    assert len(r.fragments) == 1
    f = r.fragments[0]
    assert f.spec.journal == "url/a/b" and f.spec.path_postfix == postfix and f.spec.backing_store == url
    # The URL's path is the key, SigV4-escaped ('=' as %3D): exactly once.
    from urllib.parse import unquote, urlsplit
    u = urlsplit(f.signed_url)
    assert "%s://%s" % (u.scheme, u.netloc) == s3.endpoint and unquote(u.path) == "/%s/%s" % (bucket, keys[0])
    assert u.path.count("deep/pre/fix/") == 1
    with urllib.request.urlopen(f.signed_url, timeout=30) as resp:
        assert resp.status == 200
        body = resp.read()
    assert body == s3.client().get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    assert snappy_unframe(body) == data
    assert c.read_bytes("url/a/b")[0] == data
    out = gazctl(GO_GAZCTL, b.address, "journals", "read", "--broker.cache.size", "64", "-l",
                 "name=url/a/b").stdout
    assert out == data


def test_path_postfix_template_partitions_and_falls_back(cluster, s3):
    """Hour partitions from a two-level template; a template outside the
    evaluated subset persists without a postfix (warned), losing nothing."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "pt/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    hourly = spec("pt/h", stores=(url,), length=1024)
    hourly.fragment.path_postfix_template = \
        'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}/hour={{ .Spool.FirstAppendTime.Format "15" }}'
    odd = spec("pt/odd", stores=(url,), length=1024)
    odd.fragment.path_postfix_template = "{{ .Labels }}"
    c.apply(hourly, odd)
    for j in ("pt/h", "pt/odd"):
        wait_assigned(c, j)
        assert c.append(j, b"a" * 1500).status == pb.OK
        assert c.append(j, b"b" * 10).status == pb.OK  # rolls the first
    wait_for(lambda: len(s3.keys(bucket, "pt/pt/h/")) >= 1 and len(s3.keys(bucket, "pt/pt/odd/")) >= 1, 30,
             "both journals to persist")
    import re
    for k in s3.keys(bucket, "pt/pt/h/"):
        assert re.match(r"^pt/pt/h/date=\d{4}-\d{2}-\d{2}/hour=\d{2}/[0-9a-f]{16}-[0-9a-f]{16}-[0-9a-f]{40}\.raw$",
                        k), k
    for k in s3.keys(bucket, "pt/pt/odd/"):
        assert re.match(r"^pt/pt/odd/[0-9a-f]{16}-[0-9a-f]{16}-[0-9a-f]{40}\.raw$", k), k
    assert "persisting fragment without a path postfix" in open(b.logpath).read()
    assert "unsupported action {{.Labels}}" in open(b.logpath).read()
    hf = [f.spec for f in c.fragments("pt/h").fragments if f.spec.backing_store]
    assert hf and all(re.match(r"^date=\d{4}-\d{2}-\d{2}/hour=\d{2}$", f.path_postfix) for f in hf)
    for j in ("pt/h", "pt/odd"):
        assert c.read_bytes(j)[0] == b"a" * 1500 + b"b" * 10


def recorded_url(rec, bucket, prefix):
    from urllib.parse import quote
    return "s3://%s/%s?endpoint=%s&region=us-east-1" % (bucket, prefix, quote(rec.endpoint, safe=""))


def test_s3_retries_slowdown_then_reports_it(cluster, s3):
    """503 SlowDown answers are retried with backoff; when they do not
    stop, a store's health check fails with the S3 error named. Health is
    what the store's periodic checks last found (Gazette's): a store found
    healthy stays so until its next check (30 min), and an unhealthy one is
    checked again within seconds, so it recovers without a restart."""
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "rt/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    rec.fail_next = 3
    assert health(c, url).status == pb.OK
    puts = [p for m, p, q in rec.seen if m == "PUT" and p.endswith("/.test/health-check")]
    assert len(puts) == 4  # three 503s, then the upload
    rec.outage = True
    other = recorded_url(rec, bucket, "rt2/")  # not checked yet
    t0 = time.time()
    r = health(c, other)
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY
    assert "HTTP 503 SlowDown" in r.store_health_error, r.store_health_error
    assert time.time() - t0 > 1.0  # it backed off between attempts
    assert health(c, url).status == pb.OK  # as last checked
    rec.outage = False
    t0 = time.time()
    wait_for(lambda: health(c, other).status == pb.OK, 30, "the unhealthy store's re-check")
    assert "store health check succeeded" in open(b.logpath).read()
    checks = [p for m, p, q in rec.seen if m == "PUT" and p.endswith("/rt2/.test/health-check")]
    assert len(checks) > 4  # the first check's four attempts, then re-checks
    rec.shutdown()


def test_s3_outage_keeps_spooled_bytes_and_persists_them_after(cluster, s3):
    """During an S3 outage appends answer FRAGMENT_STORE_UNHEALTHY, bytes
    already appended stay readable from the broker's spool, and the
    fragment holding them is persisted once the store answers again."""
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "out/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("out/j", stores=(url,), length=1024))
    wait_assigned(c, "out/j")
    data = records(500, b"o")
    assert c.append("out/j", data).status == pb.OK  # one spool, past its length
    rec.outage = True
    try:
        outage_checks(b, c, s3, bucket, data)
    finally:
        rec.outage = False
    wait_for(lambda: s3.keys(bucket, "out/out/j/"), 60, "the fragment to persist after the outage")
    body = s3.client().get_object(Bucket=bucket, Key=s3.keys(bucket, "out/out/j/")[0])["Body"].read()
    assert body == data
    wait_for(lambda: c.append("out/j", b"after\n", timeout=15).status == pb.OK, 30, "appends to recover")
    rec.shutdown()


def outage_checks(b, c, s3, bucket, data):
    # The next append rolls that spool (its persist now fails) and lands:
    # the store's failure is noticed by the index refresh, seconds later.
    assert c.append("out/j", b"y" * 10).status == pb.OK
    wait_for(lambda: c.append("out/j", b"x", timeout=15).status == pb.FRAGMENT_STORE_UNHEALTHY, 30,
             "appends to answer FRAGMENT_STORE_UNHEALTHY during the outage")
    wait_for(lambda: "persisting fragment failed" in open(b.logpath).read(), 30, "a failed persist")
    assert s3.keys(bucket, "out/out/j/") == []
    got, _ = c.read_bytes("out/j")
    head = data + b"y" * 10  # then the "x" appends accepted before the refresh noticed
    assert got[:len(head)] == head and got[len(head):] == b"x" * (len(got) - len(head))


def store_ops(address, store):
    """gazette_store_operation_total of `store` by (operation, status)."""
    text = urllib.request.urlopen(address + "/debug/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'gazette_store_operation_total\{store="([^"]*)",operation="(\w+)",status="(\w+)"\} (\S+)$',
                     line)
        if m and m.group(1).replace("\\\\", "\\").replace('\\"', '"') == store:
            out[(m.group(2), m.group(3))] = float(m.group(4))
    return out


def test_s3_get_resumes_a_broken_transfer(cluster, s3):
    """A fragment GET answered 503, then cut mid-body, is retried and then
    resumed with a Range from the first byte not yet received; the reader
    sees every byte once. Each failed attempt is logged at warning (store,
    key, status, attempt) and counted as a failed get in
    gazette_store_operation_total, as the read's outcome is counted once."""
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "rs/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("rs/j", stores=(url,), length=1 << 20, codec=pb.NONE))
    wait_assigned(c, "rs/j")
    data = records(4000, b"s")
    assert c.append("rs/j", data).status == pb.OK
    assert b.stop() == 0
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    wait_assigned(c, "rs/j")
    rec.ranges.clear()
    before = store_ops(b.address, url)
    rec.fail_next_get = 1
    rec.cut_next_get = 100000
    got, _ = c.read_bytes("rs/j")
    assert got == data
    assert rec.ranges == [None, None, "bytes=100000-"], rec.ranges
    log = [l for l in open(b.logpath) if "retrying s3 request" in l]
    assert len(log) == 2, log
    key = "rs/rs/j/"
    assert all("level=warning" in l and url in l and key in l for l in log), log
    assert "status=503" in log[0] and "SlowDown" in log[0] and "attempt=1" in log[0], log[0]
    assert "status=200" in log[1] and "attempt=2" in log[1], log[1]
    after = store_ops(b.address, url)
    assert after.get(("get", "error"), 0) - before.get(("get", "error"), 0) == 2, (before, after)
    assert after[("get", "success")] > before.get(("get", "success"), 0), (before, after)
    rec.shutdown()


def place_fragments(s3, bucket, prefix, journal, n):
    """BR-11 layout: fragment i covers [10i, 10i+10) with '%09d\\n' % i."""
    cl = s3.client()

    def put(i):
        body = b"%09d\n" % i
        key = "%s%s/%016x-%016x-%s.raw" % (prefix, journal, 10 * i, 10 * i + 10, hashlib.sha1(body).hexdigest())
        cl.put_object(Bucket=bucket, Key=key, Body=body)
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(put, range(n)))
    junk = {prefix + journal + "/README.txt": b"not a fragment\n",
            prefix + journal + "/0000000000000000-000000000000000a-zz.raw": b"bad sum\n"}
    for k, v in junk.items():
        cl.put_object(Bucket=bucket, Key=k, Body=v)
    # Last, on a client of its own: after an empty "dir/" PUT, SeaweedFS
    # leaves boto3's kept-alive connection hanging until its read timeout.
    s3.client().put_object(Bucket=bucket, Key=prefix + journal + "/subdir/", Body=b"")


@pytest.mark.parametrize("n", [1001, 2500])
def test_BR11_listing_past_1000_objects_with_junk(cluster, s3, n):
    bucket = s3.new_bucket()
    place_fragments(s3, bucket, "pg/", "page/j", n)
    assert len(s3.keys(bucket)) == n + 3
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("page/j", stores=(s3.url(bucket, "pg/"),), flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "page/j")
    pages, token = [], 0
    while True:
        r = c.fragments("page/j", page_limit=1000, next_page_token=token)
        assert r.status == pb.OK
        pages.append(r)
        token = r.next_page_token
        if not token:
            break
    frags = [f.spec for p in pages for f in p.fragments]
    assert len(frags) == n
    assert [(f.begin, f.end) for f in frags] == [(10 * i, 10 * i + 10) for i in range(n)]
    assert len(pages[0].fragments) == 1000 and pages[0].next_page_token == 10000
    rs = c.read("page/j", offset=10 * n - 5, end_offset=10 * n)
    assert b"".join(x.content for x in rs) == (b"%09d\n" % (n - 1))[-5:]
    assert rs[0].write_head == 10 * n
    # The junk is skipped with a warning, and the refresh does not fail.
    time.sleep(1.5)
    assert "parsing fragment" in open(b.logpath).read()
    assert "fragment index refresh failed" not in open(b.logpath).read()


def test_BR20_wrong_credentials_unhealthy_until_fixed(cluster, s3, tmp_path):
    """A store whose profile has wrong keys: appends answer
    FRAGMENT_STORE_UNHEALTHY naming the S3 error, FragmentStoreHealth
    reports it, other journals work; pointing the spec at a good profile
    recovers within a refresh, and the bytes persist."""
    creds = tmp_path / "credentials"
    creds.write_text("[bad]\naws_access_key_id = %s\naws_secret_access_key = wrong-secret\n"
                     "[unknown]\naws_access_key_id = NOSUCHKEY\naws_secret_access_key = x\n"
                     "[good]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                     % (s3.access_key, s3.access_key, s3.secret_key))
    bucket = s3.new_bucket()
    b = cluster.start(env={"AWS_SHARED_CREDENTIALS_FILE": str(creds)})
    c = Client(b.address)
    c.apply(spec("good/j"))
    for i, (profile, needle) in enumerate((("bad", "SignatureDoesNotMatch"), ("unknown", "InvalidAccessKeyId"))):
        url = s3.url(bucket, "cr/", profile=profile)
        if i:
            reapply(c, spec("cr/j", stores=(url,), length=1024))
        else:
            c.apply(spec("cr/j", stores=(url,), length=1024))
        wait_assigned(c, "cr/j")
        r = wait_for(lambda: (lambda r: r if r.status == pb.FRAGMENT_STORE_UNHEALTHY and needle in
                              r.store_health_error else None)(c.append("cr/j", b"x" * 10, timeout=15)),
                     30, "append to answer FRAGMENT_STORE_UNHEALTHY (%s)" % needle)
        assert "403" in r.store_health_error and url in r.store_health_error
        h = health(c, url)
        assert h.status == pb.FRAGMENT_STORE_UNHEALTHY and needle in h.store_health_error
        assert c.append("good/j", b"ok\n").status == pb.OK
    assert b.proc.poll() is None
    good = s3.url(bucket, "cr/", profile="good")
    reapply(c, spec("cr/j", stores=(good,), length=1024))
    t0 = time.time()
    wait_for(lambda: c.append("cr/j", b"y" * 600, timeout=15).status == pb.OK, 30, "recovery")
    assert time.time() - t0 < 15
    assert c.append("cr/j", b"z" * 600).status == pb.OK  # rolls and persists the first
    assert health(c, good).status == pb.OK
    wait_for(lambda: [k for k in s3.keys(bucket, "cr/cr/j/")], 30, "a fragment in the bucket")


def test_BR20_missing_bucket_then_created(cluster, s3):
    bucket = s3.new_bucket(create=False)
    url = s3.url(bucket, "mb/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("mb/j", stores=(url,), length=1024))
    wait_assigned(c, "mb/j")
    r = c.append("mb/j", b"x" * 10, timeout=30)
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY
    assert 'bucket "%s" does not exist' % bucket in r.store_health_error, r.store_health_error
    h = health(c, url)
    assert h.status == pb.FRAGMENT_STORE_UNHEALTHY and "does not exist" in h.store_health_error
    s3.client().create_bucket(Bucket=bucket)
    # The store's re-checks (0, 0.1 s, 1 s, 1 s, 10 s, ...) find it healthy.
    wait_for(lambda: c.append("mb/j", b"y" * 600, timeout=15).status == pb.OK, 30, "recovery")
    assert c.append("mb/j", b"z" * 600).status == pb.OK
    wait_for(lambda: s3.keys(bucket, "mb/mb/j/"), 30, "a fragment in the bucket")
    assert health(c, url).status == pb.OK
    # Gazette's store metrics, labelled by the store URL.
    m = metrics(b)
    assert m[("gazette_store_health_check_total", url, "error")] >= 1
    assert m[("gazette_store_health_check_total", url, "ok")] >= 1
    assert m[("gazette_store_operation_total", url, "put", "success")] >= 2  # the probe and the fragment
    assert m[("gazette_store_operation_total", url, "put", "error")] >= 1
    assert m[("gazette_store_operation_total", url, "list", "success")] >= 1
    assert m[("gazette_store_put_bytes_total", url, "none")] >= 600
    assert m[("gazette_store_list_items_count_count", url)] >= 1
    assert m[("gazette_store_active",)] >= 1


def metrics(b):
    """The broker's /debug/metrics as {(name, label values...): value}."""
    import re
    text = urllib.request.urlopen(b.address + "/debug/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = re.findall(r'[a-z_]+="((?:[^"\\]|\\.)*)"', m.group(2) or "")
            out[(m.group(1),) + tuple(v for v in labels)] = float(m.group(3))
    return out


@pytest.mark.parametrize("bad,fixed,needle", [
    ("&bogus=1", "", 'unknown parameter "bogus"'),
    ("&region=", "&region=us-east-1", "missing AWS region"),
], ids=["unknown-param", "no-region"])
def test_BR20_store_that_fails_to_initialise(cluster, s3, bad, fixed, needle):
    bucket = s3.new_bucket()
    base = s3.url(bucket, "init/").replace("&region=us-east-1", "")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("good/j"), spec("bad/store", stores=(base + bad,)))
    wait_assigned(c, "bad/store")
    r = c.append("bad/store", b"0123456789", timeout=30)
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY and needle in r.store_health_error, r.store_health_error
    assert c.append("good/j", b"ok\n").status == pb.OK
    h = health(c, base + bad)
    assert h.status == pb.FRAGMENT_STORE_UNHEALTHY and needle in h.store_health_error
    reapply(c, spec("bad/store", stores=(base + fixed + ("&region=us-east-1" if not fixed else ""),)))
    wait_for(lambda: c.append("bad/store", b"0123456789", timeout=15).status == pb.OK, 30, "recovery")
    assert b.proc.poll() is None


def test_s3_health_check_and_delete_probe(cluster, s3):
    bucket = s3.new_bucket()
    url = s3.url(bucket, "hc/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    assert health(c, url).status == pb.OK
    # The check wrote, read, listed, signed and fetched its probe object.
    assert "hc/.test/health-check" in s3.keys(bucket)
    r = health(c, url, check_delete=True, check_delete_prefix="del/")
    assert r.status == pb.OK, r.store_health_error
    assert not [k for k in s3.keys(bucket) if "gazette-delete-probe" in k]
    # An unreachable endpoint is reported, after retries, by name.
    dead = "s3://%s/hc/?endpoint=http%%3A%%2F%%2F127.0.0.1%%3A1&region=us-east-1" % bucket
    r = health(c, dead)
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY and "127.0.0.1:1" in r.store_health_error


def test_s3_multipart_upload_of_a_large_fragment(cluster, s3):
    """A fragment above the single-PUT threshold (32 MiB) is uploaded in
    parts and reads back byte-identical."""
    bucket = s3.new_bucket()
    url = s3.url(bucket, "mp/")
    b = cluster.start(env=s3.env())
    c = Client(b.address)
    c.apply(spec("mp/j", stores=(url,), length=64 << 20, codec=pb.NONE))
    wait_assigned(c, "mp/j")
    block = hashlib.sha256(b"seed").digest() * 4096  # 128 KiB
    data = b"".join(block[i % 7:] + block[:i % 7] for i in range(340))  # 42.5 MiB
    append_all(c, "mp/j", data, chunk=4 << 20)
    assert b.stop() == 0
    heads = [s3.client().head_object(Bucket=bucket, Key=k) for k in s3.keys(bucket, "mp/mp/j/")]
    assert sum(h["ContentLength"] for h in heads) == len(data)
    big = max(heads, key=lambda h: h["ContentLength"])
    assert big["ContentLength"] > 32 << 20
    assert "-" in big["ETag"], big["ETag"]  # a multipart object's ETag ends in -<parts>
    b2 = cluster.start(env=s3.env())
    c2 = Client(b2.address)
    wait_assigned(c2, "mp/j")
    got, _ = c2.read_bytes("mp/j")
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


CODEC_EXT = {pb.NONE: ".raw", pb.GZIP: ".gz", pb.ZSTANDARD: ".zst", pb.SNAPPY: ".sz",
             pb.GZIP_OFFLOAD_DECOMPRESSION: ""}


def settled_keys(s3, bucket, prefix, timeout=20):
    """The keys under prefix once two listings half a second apart agree."""
    prev, deadline = None, time.time() + timeout
    while time.time() < deadline:
        cur = sorted(s3.keys(bucket, prefix))
        if cur == prev:
            return cur
        prev = cur
        time.sleep(0.5)
    raise AssertionError("the keys under %s kept changing" % prefix)


def keys_of(s3, bucket, prefix, ext):
    """Fragment keys under prefix, checked to carry the codec's extension."""
    keys = s3.keys(bucket, prefix)
    for k in keys:
        name = os.path.basename(k)
        assert name.count("-") == 2 and name[len(name) - len(ext):] == ext and "." not in name[:len(name) - len(ext)], k
    return keys


def probe_direct_read(address, journal, end):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "AWS_"))}
    env.update(PROBE_DO_NOT_PROXY="1", PROBE_CACHE="64", PROBE_BLOCK="0")
    from conftest import BIN
    return subprocess.run([os.path.join(BIN, "client-probe"), "read", address, journal, "0", str(end)],
                          capture_output=True, env=env, timeout=120)


def direct_flags(codec):
    """gazctl flags for direct (signed-URL) reads. Gazette's gazctl
    v0.103.0 cannot read ZSTANDARD fragments by URL, from its own broker
    either: after a fragment's last byte its zstd reader has not reported
    EOF, and `journals read` spins on the spent fragment forever
    (decisions.md). ZSTANDARD is read through the broker instead."""
    return () if codec == pb.ZSTANDARD else ("--broker.cache.size", "256")


@pytest.mark.parametrize("codec", [pb.NONE, pb.GZIP, pb.ZSTANDARD, pb.SNAPPY, pb.GZIP_OFFLOAD_DECOMPRESSION],
                         ids=lambda c: pb.CompressionCodec.Name(c))
def test_s3_bucket_shared_with_gazettes_broker(etcd, tmp_path, s3, codec):
    """For every codec: Gazette's Go broker writes fragments that ours
    serves (streamed, and as signed URLs that our client and Gazette's
    gazctl fetch from the bucket), and ours writes fragments that
    Gazette's broker serves, streamed and to Gazette's gazctl by signed
    URL. Every read is byte-identical to what was appended."""
    from conftest import Cluster
    ext = CODEC_EXT[codec]
    rec = Recorder(s3.endpoint)
    bucket = s3.new_bucket()
    url = recorded_url(rec, bucket, "x/")
    data_go = records(3000, b"g")
    go = Cluster(etcd, str(tmp_path / "go"))
    try:
        gb = go.start(go=True, env=s3.env())
        gc = Client(gb.address)
        gc.apply(spec("cmp/go", stores=(url,), length=16 * 1024, codec=codec))
        wait_assigned(gc, "cmp/go")
        append_all(gc, "cmp/go", data_go, chunk=20 * 1024)
        # Gazette persists rolled fragments at once; a lone Gazette broker
        # never finishes its exit, so what we compare is what it persisted.
        wait_for(lambda: len(keys_of(s3, bucket, "x/cmp/go/", ext)) >= 3, 30, "Gazette's fragments in the bucket")
    finally:
        go.stop_all()
    # Listed once it is gone (and the listing has settled): it may still
    # have been uploading fragments that rolled before the wait above saw
    # three.
    go_end = max(int(os.path.basename(k).split("-")[1], 16) for k in settled_keys(s3, bucket, "x/cmp/go/"))
    if codec == pb.GZIP_OFFLOAD_DECOMPRESSION:
        k = s3.keys(bucket, "x/cmp/go/")[0]
        assert s3.client().head_object(Bucket=bucket, Key=k)["ContentEncoding"] == "gzip"
    ours = Cluster(etcd, str(tmp_path / "ours"))
    data_c = records(3000, b"c")
    try:
        b = ours.start(env=s3.env())
        c = Client(b.address)
        c.apply(spec("cmp/go", stores=(url,), length=16 * 1024, codec=codec, flags=pb.JournalSpec.O_RDONLY),
                spec("cmp/c", stores=(url,), length=16 * 1024, codec=codec))
        wait_assigned(c, "cmp/go")
        got, last = c.read_bytes("cmp/go")
        assert got == data_go[:go_end] and last.write_head == go_end
        p = probe_direct_read(b.address, "cmp/go", go_end)
        assert p.returncode == 0 and p.stdout == data_go[:go_end], p.stderr
        rec.seen.clear()
        out = gazctl(GO_GAZCTL, b.address, "journals", "read", *direct_flags(codec), "-l",
                     "name=cmp/go").stdout
        assert out == data_go[:go_end]
        signed = [p for m, p, q in rec.seen if m == "GET" and q and "/x/cmp/go/" in p]
        if direct_flags(codec):
            assert len(signed) >= 3, rec.seen  # Gazette's gazctl fetched our signed URLs
        else:
            assert not signed and [p for m, p, q in rec.seen if m == "GET" and "/x/cmp/go/" in p]
        wait_assigned(c, "cmp/c")
        append_all(c, "cmp/c", data_c, chunk=20 * 1024)
        assert b.stop() == 0
    finally:
        ours.stop_all()
    keys = keys_of(s3, bucket, "x/cmp/c/", ext)
    assert len(keys) >= 3
    if codec == pb.GZIP_OFFLOAD_DECOMPRESSION:
        assert s3.client().head_object(Bucket=bucket, Key=keys[0])["ContentEncoding"] == "gzip"
    go2 = Cluster(etcd, str(tmp_path / "go2"))
    try:
        gb = go2.start(go=True, env=s3.env())
        gc = Client(gb.address)
        gc.apply(spec("cmp/c", stores=(url,), length=16 * 1024, codec=codec, flags=pb.JournalSpec.O_RDONLY))
        wait_assigned(gc, "cmp/c")
        # Gazette's broker answers reads before its first listing of the
        # store (OFFSET_NOT_YET_AVAILABLE at 0): wait for the listing.
        wait_for(lambda: [f for f in gc.fragments("cmp/c").fragments if f.spec.backing_store], 20,
                 "Gazette's broker to list our fragments")
        got, _ = gc.read_bytes("cmp/c")
        assert got == data_c
        rec.seen.clear()
        out = gazctl(GO_GAZCTL, gb.address, "journals", "read", *direct_flags(codec), "-l",
                     "name=cmp/c").stdout
        assert out == data_c
        assert [p for m, p, q in rec.seen if m == "GET" and q == bool(direct_flags(codec)) and "/x/cmp/c/" in p]
    finally:
        go2.stop_all()
    rec.shutdown()
