"""The rest of the broker's surface: List watches, offset jumps, the HTTP
gateway, metrics, readiness during exit, JSON logs."""
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request

import protocol_pb2 as pb
from conftest import free_port, wait_for
from gazpb import Client, spec, wait_assigned
from test_cases import put_fragment


def test_list_watch_sends_snapshots_and_end_markers(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("watch/a"))
    req = pb.ListRequest(watch=True)
    stream = c._list(req, timeout=30)
    first = next(stream)
    assert [j.spec.name for j in first.journals] == ["watch/a"] and first.header.etcd.revision > 0
    assert next(stream) == pb.ListResponse()  # end of snapshot
    c.apply(spec("watch/b"))
    second = next(stream)
    assert [j.spec.name for j in second.journals] == ["watch/a", "watch/b"]
    assert second.header.etcd.revision > first.header.etcd.revision
    stream.cancel()


def test_list_pages_of_25(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(*[spec("many/j%03d" % i) for i in range(60)])
    resps = list(c._list(pb.ListRequest(), timeout=20))
    assert [len(r.journals) for r in resps] == [25, 25, 10]
    assert resps[0].HasField("header") and not resps[1].HasField("header")


def test_read_jumps_over_missing_offsets(cluster):
    b = cluster.start()
    c = Client(b.address)
    put_fragment(cluster.file_root, "jump/j", 100, b"x" * 50)
    c.apply(spec("jump/j", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "jump/j")
    rs = c.read("jump/j", offset=0)
    assert rs[0].offset == 100 and rs[0].fragment.begin == 100  # an offset jump
    assert b"".join(r.content for r in rs) == b"x" * 50


def test_http_gateway(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("gw/j"))
    wait_assigned(c, "gw/j")
    req = urllib.request.Request(b.address + "/gw/j", data=b"via http\n", method="PUT")
    resp = urllib.request.urlopen(req, timeout=10)
    assert resp.status == 204 and resp.headers["X-Commit-End"] == "9"
    resp = urllib.request.urlopen(b.address + "/gw/j?offset=0&block=false", timeout=10)
    assert resp.status == 206 and resp.read() == b"via http\n"
    assert resp.headers["X-Write-Head"] == "9" and resp.headers["X-Fragment-Name"].startswith("0000000000000000-")
    try:
        urllib.request.urlopen(b.address + "/gw/missing", timeout=10)
        assert False, "expected 404"
    except urllib.error.HTTPError as e:
        assert e.code == 404
    for bad in ("/gw/j?offset=abc", "/gw/j?offset=-5", "/", "/gw/j?block=maybe", "/Bad%20Name",
                "/gw/j/"):
        try:
            urllib.request.urlopen(b.address + bad, timeout=10)
            assert False, "expected 400 for " + bad
        except urllib.error.HTTPError as e:
            assert e.code == 400, (bad, e.code)
    # An invalid journal name is told as Gazette tells it.
    try:
        urllib.request.urlopen(b.address + "/Bad%20Name", timeout=10)
    except urllib.error.HTTPError as e:
        assert "not a valid token" in e.read().decode()
    try:
        urllib.request.urlopen(b.address + "/gw/j?offset=9&block=false", timeout=10)
        assert False, "expected 416"
    except urllib.error.HTTPError as e:
        assert e.code == 416
    # A method the gateway does not serve is named, as Gazette names it,
    # and appends nothing.
    for method in ("POST", "DELETE"):
        try:
            urllib.request.urlopen(urllib.request.Request(b.address + "/gw/j", data=b"no",
                                                          method=method), timeout=10)
            assert False, "expected 400 for " + method
        except urllib.error.HTTPError as e:
            assert e.code == 400 and e.read().decode().strip() == "unknown method: " + method
    assert urllib.request.urlopen(b.address + "/gw/j?offset=0&block=false",
                                  timeout=10).headers["X-Write-Head"] == "9"


def test_metrics_use_gazette_names(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("met/j"))
    c.append("met/j", b"12345")
    from conftest import wait_for
    want = 'gazette_journal_server_completed_totals{operation="Append",status="ok"}'
    # The counter moves right after the response is sent.
    body = wait_for(lambda: (lambda t: t if want in t else None)(
        urllib.request.urlopen(b.address + "/debug/metrics").read().decode()), 5, "metrics")
    assert 'gazette_journal_server_started_totals{operation="Append"}' in body
    assert 'gazette_journal_server_completed_totals{operation="Append",status="ok"}' in body
    assert 'gazette_write_head{journal="met/j"} 5' in body
    assert "gazette_spool_commit_bytes_total" in body


def test_ready_turns_false_while_exiting(cluster):
    a = cluster.start()
    b = cluster.start()
    c = Client(a.address)
    c.apply(*[spec("rdy/j%d" % i) for i in range(4)])
    for i in range(4):
        c.append("rdy/j%d" % i, b"x")
    states = []

    def poll():
        for _ in range(100):
            try:
                states.append(urllib.request.urlopen(a.address + "/debug/ready", timeout=1).status)
            except urllib.error.HTTPError as e:
                states.append(e.code)
            except Exception:
                states.append(None)
                return
            time.sleep(0.01)
    a.signal(signal.SIGTERM)
    t = threading.Thread(target=poll)
    t.start()
    t.join()
    a.proc.wait(30)
    assert 503 in states and 200 not in states[states.index(503):]


def test_json_logs(cluster):
    b = cluster.start(extra=["--log.format", "json"])
    b.stop()
    lines = [l for l in open(b.logpath) if l.startswith("{")]
    assert lines and all(json.loads(l)["level"] for l in lines)
    assert any(json.loads(l)["msg"] == "broker serving" for l in lines)


# The error grpc gives etcd's unreachable Range call quotes the method.
ETCD_ERR = 'etcd call "/etcdserverpb.KV/Range" failed'


def etcd_unavailable_err(cluster, fmt):
    """The err field of the broker's "etcd is unavailable" line, read back
    as a consumer would, in --log.format `fmt`."""
    dead = "http://127.0.0.1:%d" % free_port()
    b = cluster.start(wait=False, etcd_endpoint=dead, extra=["--log.format", fmt])
    try:
        line = wait_for(lambda: [l for l in open(b.logpath) if "etcd is unavailable" in l], 20,
                        "the etcd-unavailable line")[0]
    finally:
        b.signal(signal.SIGTERM)
        b.proc.wait(20)
    if fmt == "json":
        return json.loads(line)["err"]
    # logfmt: a quoted value, Go's escapes (only \" and \\ can occur here)
    m = re.search(r' err="((?:[^"\\]|\\.)*)"', line)
    assert m, line
    return re.sub(r'\\(.)', r'\1', m.group(1))


def test_log_values_keep_their_quotes(cluster):
    """A value holding quotes comes back whole from both formats (the JSON
    value was once cut at its first quote, the logfmt line left unparseable)."""
    for fmt in ("json", "text"):
        err = etcd_unavailable_err(cluster, fmt)
        assert err.startswith(ETCD_ERR), (fmt, err)


def test_list_fragments_window_and_signed_urls(cluster):
    b = cluster.start()
    c = Client(b.address)
    put_fragment(cluster.file_root, "win/j", 0, b"a" * 10)
    put_fragment(cluster.file_root, "win/j", 10, b"b" * 10)
    old = os.path.join(cluster.file_root, "win/j", sorted(os.listdir(os.path.join(cluster.file_root, "win/j")))[0])
    os.utime(old, (1_000_000_000, 1_000_000_000))  # 2001
    c.apply(spec("win/j", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "win/j")
    all_ = c.fragments("win/j").fragments
    assert [f.spec.begin for f in all_] == [0, 10] and all(f.signed_url == "" for f in all_)
    assert all_[0].spec.mod_time == 1_000_000_000
    recent = c.fragments("win/j", begin_mod_time=1_500_000_000).fragments
    assert [f.spec.begin for f in recent] == [10]
    old_only = c.fragments("win/j", end_mod_time=1_000_000_000).fragments  # inclusive, as Gazette
    assert [f.spec.begin for f in old_only] == [0]
    from google.protobuf import duration_pb2
    signed = c.fragments("win/j", signatureTTL=duration_pb2.Duration(seconds=60)).fragments
    assert signed[1].signed_url.startswith("file:///win/j/000000000000000a-0000000000000014-")


def test_fragment_store_health(cluster):
    b = cluster.start()
    c = Client(b.address)
    health = c.ch.unary_unary("/protocol.Journal/FragmentStoreHealth",
                              pb.FragmentStoreHealthRequest.SerializeToString,
                              pb.FragmentStoreHealthResponse.FromString)
    r = health(pb.FragmentStoreHealthRequest(fragment_store="file:///"), timeout=30)
    assert r.status == pb.OK and r.header.etcd.revision > 0
    r = health(pb.FragmentStoreHealthRequest(fragment_store="file:///no/such/dir/"), timeout=30)
    assert r.status == pb.FRAGMENT_STORE_UNHEALTHY and "does not exist" in r.store_health_error
    r = health(pb.FragmentStoreHealthRequest(fragment_store="file:///", check_delete=True,
                                             check_delete_prefix="probe/"), timeout=30)
    assert r.status == pb.OK


def test_configuration_from_environment(cluster):
    """Gazette's environment variables configure the broker as its flags do."""
    from conftest import Broker, free_port
    port = free_port()
    b = Broker(cluster, port=port, zone="zone-env")
    cluster.brokers.append(b)
    import subprocess
    env = dict(os.environ, BROKER_ZONE="zone-env", BROKER_LIMIT="7", BROKER_PORT=str(port),
               BROKER_HOST="127.0.0.1", BROKER_ID=b.id, BROKER_FILE_ROOT=cluster.file_root,
               ETCD_ADDRESS=cluster.etcd.endpoint, ETCD_PREFIX=cluster.prefix, ETCD_LEASE_TTL="5s",
               TMPDIR=cluster.scratch(b.id), ASAN_OPTIONS="detect_leaks=1")
    from conftest import GAZETTE
    b.log = open(b.logpath, "a")
    b.proc = subprocess.Popen([GAZETTE, "serve"], stdout=b.log, stderr=subprocess.STDOUT, env=env)
    b.wait_ready()
    import base64
    kv = json.loads(cluster.etcd.ctl("get", b.member_key(), "-w", "json"))["kvs"][0]
    bs = pb.BrokerSpec.FromString(base64.b64decode(kv["value"]))
    assert bs.journal_limit == 7 and bs.process_spec.id.zone == "zone-env"
    assert bs.process_spec.endpoint == "http://127.0.0.1:%d" % port


def test_port_zero_is_random(cluster):
    """--broker.port 0 listens on a random port (as Gazette's ":0") and
    announces it; a port out of range is refused before anything starts."""
    import base64
    import subprocess
    from conftest import Broker, GAZETTE
    b = Broker(cluster, extra=["--broker.port", "0"])
    cluster.brokers.append(b)
    b.start()
    kv = json.loads(cluster.etcd.ctl("get", b.member_key(), "-w", "json"))["kvs"][0]
    endpoint = pb.BrokerSpec.FromString(base64.b64decode(kv["value"])).process_spec.endpoint
    port = int(endpoint.rsplit(":", 1)[1])
    assert endpoint.startswith("http://127.0.0.1:") and port not in (0, b.port)
    b.address = endpoint
    assert isinstance(Client(endpoint).list(), list)  # serves on the port it announced
    for bad in ("70000", "-1", "http"):
        r = subprocess.run([GAZETTE, "serve", "--broker.port=" + bad, "--etcd.address", cluster.etcd.endpoint],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "--broker.port %s: not a port number" % bad in r.stdout + r.stderr


def test_file_root_must_exist(cluster, tmp_path):
    """--broker.file-root must name an existing directory: the broker
    fails at start, before it reaches etcd, naming the path, as Gazette's
    does for a missing one (it stats the root at start). A regular file
    fails too (Gazette's would go on and fail each file:// operation)."""
    import subprocess
    from conftest import GAZETTE, GO_GAZETTE
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    cases = ((str(tmp_path / "missing"), "No such file or directory", (GAZETTE, GO_GAZETTE)),
             (str(a_file), "not a directory", (GAZETTE,)))
    for root, why, exes in cases:
        for exe in exes:
            r = subprocess.run([exe, "serve", "--broker.file-root", root, "--broker.port", "0",
                                "--etcd.address", "http://127.0.0.1:1"],
                               capture_output=True, text=True, timeout=30)
            out = r.stdout + r.stderr
            assert r.returncode != 0 and root in out, (exe, out)
            if exe == GAZETTE:
                assert "--broker.file-root %s: %s" % (root, why) in out, out
