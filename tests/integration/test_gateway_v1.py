"""The /v1/ REST gateway (facts §8.3): POST /v1/journals/list and
/v1/journals/read answer newline-delimited {"result": ...} objects in the
protobuf JSON mapping, errors as grpc-gateway writes them. Each exchange is
run against our broker and against Gazette's Go broker, and the answers are
compared in shape (keys and JSON types at every level) and in the values
that do not depend on the process (offsets, content, statuses, specs).
Python's google.protobuf.json_format parses the results as an independent
check of the mapping."""
import base64
import json
import threading
import time

import pytest
import requests
from google.protobuf import json_format

import protocol_pb2 as pb
from conftest import Cluster
from gazpb import Client, spec, wait_assigned

DATA = b"".join(b'{"n": %d}\n' % i for i in range(3000))


def shape(v):
    """The JSON type tree of v: dict keys and value types, first array item."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__


PROCESS_KEYS = ("header", "route", "modRevision", "createRevision", "modTime", "backingStore", "fragmentUrl")


def strip_process(v):
    """Drops what differs between two broker processes: headers (broker id,
    endpoint, etcd ids and revisions), routes, revisions, and whether the
    fragment was persisted yet (backing store, URL, mod time)."""
    if isinstance(v, dict):
        return {k: strip_process(x) for k, x in v.items() if k not in PROCESS_KEYS}
    if isinstance(v, list):
        return [strip_process(x) for x in v]
    return v


def comparable(objs):
    """Read results with their content joined: how a broker cuts content
    into messages is its own (chunk sizes differ between spool and file)."""
    out, content = [], b""
    for o in objs:
        r = o.get("result")
        if r is not None and r.get("content") is not None:
            content += base64.b64decode(r["content"])
            continue
        out.append(strip_process(o))
    return out, content


def shapes(objs):
    """The distinct shapes, in order of first appearance."""
    out = []
    for o in objs:
        if shape(o) not in out:
            out.append(shape(o))
    return out


def post(address, path, body, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(address + path, data=data, timeout=kw.pop("timeout", 20), **kw)


def lines(resp):
    """The response's JSON objects: newline-delimited, the last one (an
    error object) possibly without a newline."""
    return [json.loads(l) for l in resp.text.split("\n") if l.strip()]


def setup_broker(etcd, tmp_path, go, extra=()):
    c = Cluster(etcd, str(tmp_path / ("go" if go else "c")))
    b = c.start(go=go, extra=extra)
    cl = Client(b.address)
    cl.apply(spec("v1/a", codec=pb.GZIP, labels=[("app.gazette.dev/tag", "v1")]),
             spec("v1/b", labels=[("app.gazette.dev/tag", "v1")]))
    wait_assigned(cl, "v1/a")
    wait_assigned(cl, "v1/b")
    assert cl.append("v1/a", DATA).status == pb.OK
    return c, b, cl


EXCHANGES = [
    ("/v1/journals/read", {"journal": "v1/a"}),
    ("/v1/journals/read", {"journal": "v1/a", "offset": "1000", "endOffset": "2000"}),
    ("/v1/journals/read", {"journal": "v1/a", "metadata_only": True}),
    ("/v1/journals/read", {"journal": "v1/missing"}),
    ("/v1/journals/read", {"journal": "v1/b", "offset": 5}),
    ("/v1/journals/list", {}),
    ("/v1/journals/list", {"selector": {"include": {"labels": [{"name": "name", "value": "v1/b"}]}}}),
    ("/v1/journals/list", ""),
    ("/v1/journals/read", "{\"journal\": \"v1/a\", \"offset\": \" 34000 \", \"metadataOnly\": true}"),
    ("/v1/journals/read", '{"journal": "v1/b"} and bytes after the first JSON value'),
]


@pytest.fixture(scope="module")
def both(etcd, tmp_path_factory):
    """Our broker and Gazette's, each with the same journals and content."""
    tmp = tmp_path_factory.mktemp("v1")
    made = {}
    try:
        for go in (False, True):
            made[go] = setup_broker(etcd, tmp, go, extra=["--broker.allow-origin", "http://ui.example"])
        yield {go: m[1] for go, m in made.items()}
    finally:
        for c, _, cl in made.values():
            cl.close()
            c.stop_all()


@pytest.mark.parametrize("path,body", EXCHANGES, ids=[str(i) for i in range(len(EXCHANGES))])
def test_v1_same_answers_as_gazette(both, path, body):
    got = {}
    for go, b in both.items():
        r = post(b.address, path, body)
        assert r.headers["Content-Type"] == "application/json"
        assert r.headers.get("Grpc-Metadata-Content-Type") == "application/grpc"
        got[go] = (r.status_code, lines(r))
    ours, theirs = got[False], got[True]
    assert ours[0] == theirs[0] == 200
    assert shapes(ours[1]) == shapes(theirs[1])
    assert comparable(ours[1]) == comparable(theirs[1])
    assert ours[1], "no result objects"
    for obj in ours[1]:
        assert list(obj) == ["result"]
        want = pb.ListResponse() if path.endswith("list") else pb.ReadResponse()
        json_format.ParseDict(obj["result"], want)  # the protobuf JSON mapping, checked independently


def test_v1_read_content_matches_grpc_read(both):
    b = both[False]
    objs = lines(post(b.address, "/v1/journals/read", {"journal": "v1/a"}))
    data = b"".join(base64.b64decode(o["result"]["content"]) for o in objs if o["result"]["content"])
    assert data == DATA
    first = objs[0]["result"]
    assert first["status"] == "OK" and first["writeHead"] == str(len(DATA))
    assert first["fragment"]["compressionCodec"] == "GZIP" and first["fragment"]["end"] == str(len(DATA))
    assert objs[-1]["result"]["status"] == "OFFSET_NOT_YET_AVAILABLE"
    grpc_read = Client(b.address).read("v1/a")
    assert [o["result"]["offset"] for o in objs] == [str(r.offset) for r in grpc_read]


@pytest.mark.parametrize("body", ['{"journal": "v1/a", "offset": "abc"}', "not json", '{"journal": 5}',
                                  '{"journal": "v1/a", "block": "yes"}', "[1]",
                                  '{"journal": "v1/a", "offset": 1.5}', '{"journal": "v1/a", "offset": "05"}',
                                  '{"journal": "v1/a", "offset": "1e3"}', '{"journal": "v1/a"',
                                  '{"journal": "v1/a", "metadataOnly": 1}'])
def test_v1_undecodable_body_is_400_status_object(both, body):
    for go, b in both.items():
        r = post(b.address, "/v1/journals/read", body)
        assert r.status_code == 400, (go, r.text)
        obj = r.json()
        assert sorted(obj) == ["code", "details", "message"] and obj["code"] == 3 and obj["details"] == []
        assert obj["message"]
        assert r.headers["Content-Length"] == str(len(r.content))


@pytest.mark.parametrize("body", [{"journal": "bad journal"}, {"journal": "v1/a", "offset": "-5"}, {}, "null"])
def test_v1_rejected_request_is_a_stream_error(both, body):
    """A request the broker refuses ends the stream in an error object;
    nothing was written, so the HTTP status is the error's httpCode. Our
    broker answers INVALID_ARGUMENT where Gazette answers UNKNOWN
    (docs/decisions.md), so codes are checked for consistency, the message
    for equality."""
    got = {}
    for go, b in both.items():
        r = post(b.address, "/v1/journals/read", body)
        assert not r.text.endswith("\n")  # grpc-gateway writes no delimiter after an error
        err = r.json()["error"]
        assert sorted(err) == ["details", "grpcCode", "httpCode", "httpStatus", "message"]
        assert r.status_code == err["httpCode"]
        assert (err["grpcCode"], err["httpCode"], err["httpStatus"]) in (
            (2, 500, "Internal Server Error"), (3, 400, "Bad Request"))
        got[go] = err["message"]
    assert got[False] == got[True]
    assert got[False]


@pytest.mark.parametrize("method,path", [("GET", "/v1/journals/read"), ("POST", "/v1/journals/apply"),
                                         ("POST", "/v1/journals/read/"), ("PUT", "/v1/journals/list")])
def test_v1_unknown_route_is_501(both, method, path):
    for go, b in both.items():
        r = requests.request(method, b.address + path, data="{}", timeout=10)
        assert r.status_code == 501, (go, method, path)
        assert r.json() == {"code": 12, "message": "Not Implemented", "details": []}


def test_v1_cors(both):
    for go, b in both.items():
        r = requests.options(b.address + "/v1/journals/read", headers={"Origin": "http://ui.example"}, timeout=10)
        assert r.status_code == 200 and r.content == b""
        assert r.headers["Access-Control-Allow-Origin"] == "http://ui.example"
        assert r.headers["Access-Control-Allow-Methods"] == "GET, POST, OPTIONS"
        assert "Authorization" in r.headers["Access-Control-Allow-Headers"]
        r = post(b.address, "/v1/journals/list", {}, headers={"Origin": "http://other.example"})
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
        r = post(b.address, "/v1/journals/list", {}, headers={"Origin": "http://ui.example"})
        assert r.headers["Access-Control-Allow-Origin"] == "http://ui.example"


def test_v1_blocking_read_tails_the_journal(cluster):
    b = cluster.start()
    cl = Client(b.address)
    cl.apply(spec("v1/tail"))
    wait_assigned(cl, "v1/tail")
    assert cl.append("v1/tail", b"first\n").status == pb.OK
    r = requests.post(b.address + "/v1/journals/read", data='{"journal":"v1/tail","block":true}',
                      stream=True, timeout=20)
    assert r.status_code == 200
    it = r.iter_lines()
    got = bytearray()
    threading.Timer(0.5, lambda: cl.append("v1/tail", b"second\n")).start()
    deadline = time.time() + 20
    while got != b"first\nsecond\n" and time.time() < deadline:
        res = json.loads(next(it))["result"]
        assert res["status"] == "OK"
        if res["content"]:
            got += base64.b64decode(res["content"])
    assert got == b"first\nsecond\n"
    r.close()  # the broker cancels the read; it stays serving
    time.sleep(0.5)
    assert cl.read_bytes("v1/tail")[0] == b"first\nsecond\n"
    cl.close()



def test_v1_read_and_list_through_either_broker(cluster):
    """With two brokers, the /v1/ gateway of the one that is not the
    journal's primary proxies the read (the loopback Read is not
    do_not_proxy): both answer the same content, and List the same
    journals."""
    b1, b2 = cluster.start(), cluster.start()
    cl = Client(b1.address)
    cl.apply(spec("v1/two/a"), spec("v1/two/b"))
    wait_assigned(cl, "v1/two/a")
    wait_assigned(cl, "v1/two/b")
    assert cl.append("v1/two/a", DATA[:5000]).status == pb.OK
    assert cl.append("v1/two/b", DATA[:7000]).status == pb.OK
    # Each journal has its primary on one of the two, so reading both
    # journals through both brokers proxies at least two of the four reads.
    for b in (b1, b2):
        for name, want in (("v1/two/a", DATA[:5000]), ("v1/two/b", DATA[:7000])):
            objs = lines(post(b.address, "/v1/journals/read", {"journal": name}))
            got = b"".join(base64.b64decode(o["result"]["content"]) for o in objs if o["result"]["content"])
            assert got == want, (b.address, name)
        listing = lines(post(b.address, "/v1/journals/list",
                             {"selector": {"include": {"labels": [{"name": "prefix", "value": "v1/two/"}]}}}))
        assert sorted(j["spec"]["name"] for o in listing for j in o["result"]["journals"]) == \
            ["v1/two/a", "v1/two/b"]
    cl.close()
