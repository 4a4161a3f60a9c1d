"""/debug/metrics as Gazette's: every metric family Gazette's broker
defines (read from Gazette's own source, the pinned module in the cache)
is exported by ours with the same type, help text and label names after
real appends, reads and failures; and the same RPCs, sent to our broker
and to Gazette's, count under the same operation and status labels."""
import glob
import gzip
import os
import re
import urllib.error
import urllib.request

import pytest

import protocol_pb2 as pb
from conftest import Cluster, wait_for
from gazpb import Client, spec, wait_assigned
from test_cases import put_fragment

GAZETTE_SRC = os.path.join(os.environ.get("GAZ_CACHE", os.path.expanduser("~/.cache/gazette-c")),
                           "gomod/go.gazette.dev/core@v0.103.0")
# The packages linked into Gazette's broker whose metrics its broker moves.
BROKER_PACKAGES = ("broker", "broker/fragment", "broker/stores", "allocator", "broker/client")

# Client metrics Gazette's broker defines but never moves (only a client's
# direct fragment reads through signed URLs count them).
CLIENT_ONLY = ("gazette_fragment_open_total", "gazette_fragment_open_bytes_total",
               "gazette_fragment_open_content_length_total")

DEF_RE = re.compile(r'promauto\.New(Counter|Gauge|Histogram)(Vec)?\(prometheus\.\w+Opts\{(.*?)\}'
                    r'(?:,\s*\[\]string\{(.*?)\})?\)', re.S)


def gazette_definitions():
    """{name: (type, help, sorted label names)} from Gazette's source."""
    if not os.path.isdir(GAZETTE_SRC):
        pytest.skip("Gazette's source is not in the cache (scripts/deps.sh)")
    defs = {}
    for pkg in BROKER_PACKAGES:
        for path in glob.glob(os.path.join(GAZETTE_SRC, pkg, "*.go")):
            if path.endswith("_test.go"):
                continue
            for kind, _, opts, labels in DEF_RE.findall(open(path).read()):
                name = re.search(r'Name:\s*"([^"]+)"', opts).group(1)
                help_ = re.search(r'Help:\s*"([^"]*)"', opts).group(1)
                names = sorted(re.findall(r'"([^"]+)"', labels or ""))
                if name not in CLIENT_ONLY:
                    defs[name] = (kind.lower(), help_, names)
    assert len(defs) > 20, "parsed too few of Gazette's metrics: %s" % sorted(defs)
    return defs


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(address):
    """{family: {"type", "help", "samples": [(name, {labels}, value)]}}."""
    text = urllib.request.urlopen(address + "/debug/metrics", timeout=10).read().decode()
    fams, cur = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            cur = fams.setdefault(name, {"samples": []})
            cur["help"] = help_.replace("\\n", "\n").replace("\\\\", "\\")
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            fams.setdefault(name, {"samples": []})["type"] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE_RE.match(line)
            assert m, "bad sample line %r" % line
            sname, labels, value = m.groups()
            fam = sname
            for suffix in ("_bucket", "_sum", "_count"):
                if sname.endswith(suffix) and sname[:-len(suffix)] in fams and \
                        fams[sname[:-len(suffix)]].get("type") in ("histogram", "summary"):
                    fam = sname[:-len(suffix)]
            fams.setdefault(fam, {"samples": []})["samples"].append((sname, dict(LABEL_RE.findall(labels or "")), float(value)))
    return fams


def label_names(fam):
    return sorted({k for _, labels, _ in fam["samples"] for k in labels if k != "le"})


def series(fams, name):
    return {tuple(sorted(l.items())): v for _, l, v in fams.get(name, {"samples": []})["samples"]}


def settled(address):
    """A scrape taken once every started JournalServer RPC has completed:
    a server counts an RPC's completion when its handler returns, which
    can come after the client already has its response (the gateway's GET
    reads through a Read of its own), so a scrape taken at once may miss
    the last one, on Gazette's broker as on ours."""
    def quiet():
        fams = scrape(address)
        started = series(fams, "gazette_journal_server_started_totals")
        done = {}
        for k, v in series(fams, "gazette_journal_server_completed_totals").items():
            op = dict(k)["operation"]
            done[op] = done.get(op, 0) + v
        return fams if all(done.get(dict(k)["operation"], 0) >= v for k, v in started.items()) else None
    return wait_for(quiet, 10, "every started RPC completed")


def gateway(address, path, data=None):
    req = urllib.request.Request(address + path, data=data, method="PUT" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def rpc_workload(c, address):
    """The same RPCs for either broker: successes, Gazette statuses and
    RPC errors of Append, Read, List and ListFragments."""
    c.apply(spec("metrics/live"), spec("metrics/ro", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "metrics/live")
    wait_assigned(c, "metrics/ro")
    assert c.append("metrics/live", b"hello\n").status == pb.OK
    assert c.append("metrics/live", b"again\n").status == pb.OK
    assert c.append("metrics/missing", b"x", retry=False).status == pb.JOURNAL_NOT_FOUND
    assert c.append("metrics/live", b"x", offset=1, retry=False).status == pb.WRONG_APPEND_OFFSET
    assert c.append("metrics/ro", b"x", retry=False).status == pb.NOT_ALLOWED
    with pytest.raises(Exception):  # fails validation: an RPC error
        c.append("Bad Name", b"x", retry=False)
    data, _ = c.read_bytes("metrics/live")
    assert data == b"hello\nagain\n"
    assert c.read("metrics/missing")[0].status == pb.JOURNAL_NOT_FOUND
    with pytest.raises(Exception):
        c.read("Bad Name")
    assert c.fragments("metrics/missing").status == pb.JOURNAL_NOT_FOUND
    assert c.fragments("metrics/live").status == pb.OK
    assert gateway(address, "/metrics/live", b"via gateway\n")[0] == 204
    assert gateway(address, "/metrics/live?offset=0&block=false") == (206, b"hello\nagain\nvia gateway\n")


def test_metrics_match_gazette_definitions(cluster):
    """Every metric family of Gazette's broker is ours too, with its type,
    help text and label names; after a read of a persisted fragment, the
    fragment reader's counters carry the journal and codec."""
    defs = gazette_definitions()
    b = cluster.start()
    c = Client(b.address)
    rpc_workload(c, b.address)
    body = b"0123456789" * 10
    d = os.path.join(cluster.file_root, "metrics/stored")
    os.makedirs(d, exist_ok=True)
    import hashlib
    with open(os.path.join(d, "%016x-%016x-%s.gz" % (0, len(body), hashlib.sha1(body).hexdigest())), "wb") as f:
        f.write(gzip.compress(body))
    put_fragment(cluster.file_root, "metrics/stored", len(body), b"raw bytes")
    c.apply(spec("metrics/stored", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "metrics/stored")
    assert c.read_bytes("metrics/stored", offset=30)[0] == body[30:] + b"raw bytes"
    fams = wait_for(lambda: (lambda f: f if "gazette_read_fragment_bytes_total" in f else None)(
        scrape(b.address)), 10, "fragment read metrics")

    missing = sorted(set(defs) - set(fams))
    assert not missing, "Gazette's metrics our broker lacks: %s" % missing
    for name, (kind, help_, labels) in sorted(defs.items()):
        fam = fams[name]
        assert fam["type"] == kind, (name, fam["type"], kind)
        assert fam["help"] == help_, (name, fam["help"], help_)
        assert fam["samples"], "%s has no samples" % name
        assert label_names(fam) == labels, (name, label_names(fam), labels)

    reads = series(fams, "gazette_read_fragment_bytes_total")
    discards = series(fams, "gazette_discard_fragment_bytes_total")
    gz = (("codec", "GZIP"), ("journal", "metrics/stored"))
    raw = (("codec", "NONE"), ("journal", "metrics/stored"))
    assert reads[gz] == 70 and discards[gz] == 30, (reads, discards)
    assert reads[raw] == 9 and discards[raw] == 0, (reads, discards)
    assert series(fams, "gazette_append_bytes_total")[(("journal", "metrics/live"),)] == 12
    assert series(fams, "gazette_read_bytes_total")[(("journal", "metrics/live"),)] == 24
    # The allocator of this lone broker added every assignment it holds.
    assert series(fams, "gazette_allocator_assignment_added_total")[()] >= 3
    assert series(fams, "gazette_allocator_members")[()] == 1
    assert series(fams, "gazette_allocator_items")[()] == 3
    assert series(fams, "gazette_allocator_desired_replication_slots")[()] == 3
    assert series(fams, "gazette_allocator_converge_total")[()] >= 1
    # Store operations are labelled by the store as the spec names it.
    ops = series(fams, "gazette_store_operation_total")
    assert ops[(("operation", "get"), ("status", "success"), ("store", "file:///"))] >= 2
    assert ops[(("operation", "list"), ("status", "success"), ("store", "file:///"))] >= 1
    # client_golang's scrape handler counters.
    assert series(fams, "promhttp_metric_handler_requests_in_flight")[()] == 1
    assert set(series(fams, "promhttp_metric_handler_requests_total")) == \
        {(("code", "200"),), (("code", "500"),), (("code", "503"),)}
    for name in ("process_virtual_memory_max_bytes", "process_network_receive_bytes_total",
                 "process_network_transmit_bytes_total"):
        assert name in fams, name


def test_unlabelled_metrics_present_from_start(cluster):
    """Gazette's unlabelled counters and gauges read 0 before anything
    happened (promauto registers them), so a rate() has a start."""
    defs = gazette_definitions()
    b = cluster.start()
    fams = scrape(b.address)
    for name, (kind, _, labels) in sorted(defs.items()):
        if not labels:
            assert name in fams and fams[name]["samples"], "%s absent at start" % name


def test_completed_status_labels_as_gazette(cluster, tmp_path):
    """The same RPCs against our broker and Gazette's count under the same
    gazette_journal_server_completed_totals labels: "ok", Gazette's
    Status names, and "<error>" for an RPC that failed."""
    ours = cluster.start()
    go_cluster = Cluster(cluster.etcd, str(tmp_path / "go"))
    go = go_cluster.start(go=True)
    try:
        results, grpc = [], []
        for b in (ours, go):
            rpc_workload(Client(b.address), b.address)
            fams = settled(b.address)
            results.append(series(fams, "gazette_journal_server_completed_totals"))
            grpc.append(fams)
        ours_s, go_s = results
        # wait_assigned polls List as often as it takes: compare List's
        # labels, not its count.
        strip = lambda s: {k: (v if dict(k)["operation"] != "List" else 1) for k, v in s.items()}
        assert strip(ours_s) == strip(go_s)
        want = {("Append", "ok"), ("Append", "JOURNAL_NOT_FOUND"), ("Append", "WRONG_APPEND_OFFSET"),
                ("Append", "NOT_ALLOWED"), ("Append", "<error>"), ("Read", "ok"),
                ("Read", "JOURNAL_NOT_FOUND"), ("Read", "<error>"), ("ListFragments", "ok"),
                ("ListFragments", "JOURNAL_NOT_FOUND"), ("Apply", "ok"), ("List", "ok")}
        assert {(dict(k)["operation"], dict(k)["status"]) for k in ours_s} == want
        # go-grpc-prometheus's server families, as Gazette's server has them:
        # type, help, labels and the label values these RPCs gave.
        for name in ("grpc_server_started_total", "grpc_server_handled_total",
                     "grpc_server_msg_received_total", "grpc_server_msg_sent_total",
                     "grpc_server_handling_seconds"):
            o, g = grpc[0][name], grpc[1][name]
            assert (o["type"], o["help"], label_names(o)) == (g["type"], g["help"], label_names(g)), name
            # Our one departure: a request failing validation is
            # INVALID_ARGUMENT (Gazette's: UNKNOWN), see README.
            keys = lambda f: {tuple(sorted((k, "Unknown" if (k, v) == ("grpc_code", "InvalidArgument") else v)
                                           for k, v in l.items() if k != "le"))
                              for _, l, _ in f["samples"]}
            assert keys(o) == keys(g), (name, keys(o) ^ keys(g))
        handled = series(grpc[0], "grpc_server_handled_total")
        key = (("grpc_code", "OK"), ("grpc_method", "Append"), ("grpc_service", "protocol.Journal"),
               ("grpc_type", "client_stream"))
        assert handled[key] == series(grpc[1], "grpc_server_handled_total")[key]
        sent = series(grpc[0], "grpc_server_msg_sent_total")
        assert sent[(("grpc_method", "Append"), ("grpc_service", "protocol.Journal"),
                     ("grpc_type", "client_stream"))] == \
            series(grpc[1], "grpc_server_msg_sent_total")[(("grpc_method", "Append"),
                                                           ("grpc_service", "protocol.Journal"),
                                                           ("grpc_type", "client_stream"))]
    finally:
        go_cluster.stop_all()


def test_read_served_bytes_by_source(cluster):
    """Ours: gazette_read_served_bytes_total counts content a Read sent
    from spools and from stores, and gazette_read_fragment_urls_total the
    signed URLs sent (persisted fragments)."""
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("served/j", length=1024))
    wait_assigned(c, "served/j")

    def served():
        fams = scrape(b.address)
        s = series(fams, "gazette_read_served_bytes_total")
        return s[(("source", "spool"),)], s[(("source", "store"),)], \
            series(fams, "gazette_read_fragment_urls_total")[()]
    assert served() == (0, 0, 0)
    # A journal's first write is persisted at once; the next one stays in
    # the spool (it does not reach the 1 KiB fragment length).
    assert c.append("served/j", b"a" * 100).status == pb.OK
    wait_for(lambda: len(list(c.fragments("served/j").fragments)) >= 1 and
             all(f.spec.backing_store for f in c.fragments("served/j").fragments), 20, "first write persisted")
    assert c.append("served/j", b"b" * 300).status == pb.OK
    got, _ = c.read_bytes("served/j", offset=100)
    assert got == b"b" * 300
    assert served() == (300, 0, 0)
    got, _ = c.read_bytes("served/j", offset=0, end_offset=100)
    assert got == b"a" * 100
    spool, store, urls = served()
    assert (spool, store) == (300, 100) and urls >= 1, (spool, store, urls)
    # A do_not_proxy read of the persisted fragment gets its URL, no bytes.
    rs = c.read("served/j", offset=0, end_offset=100, do_not_proxy=True)
    assert rs[0].fragment_url and not any(r.content for r in rs), rs
    assert served()[1] == 100 and served()[2] > urls
