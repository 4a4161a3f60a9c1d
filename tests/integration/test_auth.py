"""Authorization tokens (facts §11) against real brokers: with
--broker.auth-keys set, a request without a token, signed with a wrong key,
expired, missing its capability or naming a journal its selector does not
match fails exactly as Gazette's does; the right tokens work directly,
through a proxying broker and across replication (brokers re-sign); a
mixed cluster of ours and Gazette's sharing keys replicates and proxies;
Gazette's gazctl (--broker.auth-token and --broker.auth-keys) and ours
work against our brokers; the HTTP gateways; "AA==" rollouts; calls end
at their token's expiry. Tokens here are made with Python's hmac, not by
the code under test."""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

import protocol_pb2 as pb
from conftest import GAZCTL, GO_GAZCTL, wait_for
from gazpb import Client, spec, wait_assigned, wait_route

KEY1, KEY2 = b"first signing key", b"second key"
KEYS = "%s, %s" % (base64.b64encode(KEY1).decode(), base64.b64encode(KEY2).decode())
LIST, APPLY, READ, APPEND, REPLICATE, ALL = 2, 4, 8, 16, 32, 0xFFFFFFFF
UNAUTH = grpc.StatusCode.UNAUTHENTICATED


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(cap, names=(), key=KEY1, ttl=3600, alg="HS256", labels=(), **extra):
    """A bearer value: claims {cap, sel: name in names, and the (name,
    value) pairs of `labels`}."""
    labels = [{"name": "name", "value": n} for n in names] + [{"name": k, "value": v} for k, v in labels]
    now = int(time.time())
    claims = {"cap": cap, "sel": {"include": {"labels": labels or None}, "exclude": {"labels": None}},
              "iat": now, "exp": now + ttl}
    claims.update(extra)
    text = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode()) + "." + b64url(json.dumps(claims).encode())
    md = hashlib.sha384 if alg == "HS384" else hashlib.sha256
    return "Bearer %s.%s" % (text, b64url(hmac.new(key, text.encode(), md).digest()))


def signer(key=KEY1):
    """Signs each call as Gazette's clients do (§11 default claims)."""
    caps = {"List": LIST, "Apply": APPLY, "Read": READ, "Append": APPEND, "ListFragments": READ}
    return lambda method, journal=None: token(caps[method], [journal] if journal else (), key=key)


def refused(fn, message, code=UNAUTH):
    with pytest.raises(grpc.RpcError) as e:
        fn()
    assert e.value.code() == code, (e.value.code(), e.value.details())
    assert e.value.details() == message, e.value.details()


@pytest.fixture
def secured(cluster):
    """Two of our brokers sharing keys; journals auth/a (replication 2),
    auth/b (labelled team=b) and other/c."""
    brokers = [cluster.start(extra=["--broker.auth-keys", KEYS]) for _ in range(2)]
    admin = Client(brokers[0].address, auth=token(ALL))
    admin.apply(spec("auth/a", replication=2), spec("auth/b", labels=[("team", "b")]), spec("other/c"))
    for j in ("auth/a", "auth/b", "other/c"):
        wait_assigned(admin, j)
    wait_route(admin, "auth/a", 2)
    yield cluster, brokers, admin
    admin.close()


def test_each_refusal_is_gazettes(secured):
    _, brokers, _ = secured
    addr = brokers[0].address
    read = lambda auth, j="auth/a": Client(addr, auth=auth).read(j, timeout=10)

    refused(lambda: read(None), "missing or empty Authorization token")
    refused(lambda: read("Basic abc"), "invalid or unsupported Authorization header (expected 'Bearer')")
    refused(lambda: read(token(READ, key=b"wrong key")),
            "verifying Authorization: token signature is invalid: signature is invalid")
    refused(lambda: read(token(READ, ttl=-10)), "verifying Authorization: token has invalid claims: token is expired")
    refused(lambda: read(token(READ, alg="HS512")),
            "verifying Authorization: token signature is invalid: signing method HS512 is invalid")
    refused(lambda: read(token(APPEND | LIST)), "authorization is missing required READ capability")
    refused(lambda: Client(addr, auth=token(READ)).append("auth/a", b"x"),
            "authorization is missing required APPEND capability")
    refused(lambda: Client(addr, auth=token(READ)).list(), "authorization is missing required LIST capability")
    refused(lambda: Client(addr, auth=token(READ)).apply(spec("auth/z")),
            "authorization is missing required APPLY capability")
    # A token of the second key, HS384, verifies. One expired within the
    # 5 s leeway verifies too, but the call ends at its expiry: at once.
    assert Client(addr, auth=token(READ, key=KEY2, alg="HS384")).read("auth/a", timeout=10)
    with pytest.raises(grpc.RpcError) as e:
        read(token(READ, ttl=-3))
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value


def test_selector_hides_what_it_does_not_match(secured):
    _, brokers, _ = secured
    addr = brokers[0].address
    # Read and Append of a journal the claims do not name: not found.
    r = Client(addr, auth=token(READ, ["auth/a"])).read("other/c", timeout=10)
    assert r[0].status == pb.JOURNAL_NOT_FOUND and not r[0].header.route.members
    r = Client(addr, auth=token(APPEND, ["auth/a"])).append("other/c", b"x")
    assert r.status == pb.JOURNAL_NOT_FOUND
    f = Client(addr, auth=token(READ, ["auth/a"])).fragments("auth/b")
    assert f.status == pb.JOURNAL_NOT_FOUND
    # By label: team=b sees auth/b only.
    c = Client(addr, auth=token(READ | APPEND | LIST, labels=[("team", "b")]))
    assert c.append("auth/b", b"team b\n").status == pb.OK
    assert c.append("auth/a", b"x").status == pb.JOURNAL_NOT_FOUND
    assert [j.spec.name for j in c.list()] == ["auth/b"]
    # List: claims' "prefix" label is a name prefix, as Gazette rewrites it.
    pfx = token(LIST, labels=[("prefix", "auth/")])
    assert sorted(j.spec.name for j in Client(addr, auth=pfx).list()) == ["auth/a", "auth/b"]
    # Apply: an upsert outside the claims, or a delete of one, is refused
    # whole; inside them it is applied.
    ap = Client(addr, auth=token(APPLY, ["auth/a", "auth/new"]))
    refused(lambda: ap.apply(spec("auth/new"), spec("other/z")), "not authorized to other/z")
    refused(lambda: ap.apply(deletes=[("other/c", -1)]), "not authorized to other/c")
    assert ap.apply(spec("auth/new")).status == pb.OK
    assert "other/z" not in [j.spec.name for j in Client(addr, auth=token(LIST)).list()]


def test_right_tokens_proxy_and_replicate(secured):
    cluster, brokers, admin = secured
    # A third broker, in no route: it proxies, signing for the client.
    third = cluster.start(extra=["--broker.auth-keys", KEYS])
    c = Client(third.address, auth=signer())
    for i in range(5):
        r = c.append("auth/a", b"line %d\n" % i)
        assert r.status == pb.OK, r
    data, _ = c.read_bytes("auth/a")
    assert data == b"".join(b"line %d\n" % i for i in range(5))
    assert c.fragments("auth/a").status == pb.OK
    # Replication: every append above went to both members (a Replicate
    # the primary signed); each member serves the same bytes directly.
    route = wait_route(admin, "auth/a", 2)
    assert len(route.endpoints) == 2
    for ep in route.endpoints:
        got, last = Client(ep, auth=signer()).read_bytes("auth/a")
        assert got == data, (ep, last)


def test_mixed_cluster_shares_keys(cluster):
    ours = cluster.start(extra=["--broker.auth-keys", KEYS])
    theirs = cluster.start(go=True, extra=["--broker.auth-keys", KEYS])
    admin = Client(ours.address, auth=token(ALL))
    names = ["mixed/%d" % i for i in range(4)]
    admin.apply(*[spec(n, replication=2) for n in names])
    for n in names:
        wait_route(admin, n, 2)
    # Through each broker, to every journal: half have the other primary
    # (proxied Append, re-signed), and each replicates to the other kind.
    for b in (ours, theirs):
        c = Client(b.address, auth=signer())
        for n in names:
            assert c.append(n, b"via %s\n" % b.id.encode()).status == pb.OK
    for b in (ours, theirs):
        c = Client(b.address, auth=signer())
        for n in names:
            data, _ = c.read_bytes(n)
            assert data == b"via %s\nvia %s\n" % (ours.id.encode(), theirs.id.encode()), (b.id, n, data)
        refused(lambda: Client(b.address).list(), "missing or empty Authorization token")
    theirs.stop()


def gazctl(exe, address, *args, stdin=None, check=True, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env.update({"BROKER_ADDRESS": address, "HOME": "/nonexistent"})
    env.update(env_extra or {})
    p = subprocess.run([exe] + list(args), input=stdin, capture_output=True, env=env, timeout=60)
    if check and p.returncode:
        raise AssertionError("%s %s failed (%d): %s" % (exe, args, p.returncode, p.stderr.decode()))
    return p


@pytest.mark.parametrize("exe", [GAZCTL, GO_GAZCTL], ids=["ours", "gazette"])
def test_gazctl_with_a_token_or_keys(secured, exe):
    _, brokers, _ = secured
    addr = brokers[1].address
    tok = token(ALL)[7:]
    p = gazctl(exe, addr, "journals", "list", "--format", "json", "--broker.auth-token", tok)
    assert "auth/a" in p.stdout.decode()
    # Signing with keys (each call its own claims), also from the env.
    keys = base64.b64encode(KEY1).decode()
    gazctl(exe, addr, "journals", "append", "-l", "name=auth/a", stdin=b"from gazctl\n",
           env_extra={"BROKER_AUTH_KEYS": keys})
    p = gazctl(exe, addr, "journals", "read", "-l", "name=auth/a", "--broker.auth-keys", keys)
    assert b"from gazctl\n" in p.stdout
    # Without either: refused, with the broker's message.
    p = gazctl(exe, addr, "journals", "list", check=False)
    assert p.returncode != 0 and b"missing or empty Authorization token" in p.stderr, p.stderr
    p = gazctl(exe, addr, "journals", "list", "--broker.auth-keys", base64.b64encode(b"nope").decode(), check=False)
    assert p.returncode != 0 and b"signature is invalid" in p.stderr, p.stderr


def test_our_gazctl_bad_keys_are_a_clear_error(secured):
    _, brokers, _ = secured
    p = gazctl(GAZCTL, brokers[0].address, "journals", "list", "--broker.auth-keys", "not*base64", check=False)
    assert p.returncode != 0
    assert b"--broker.auth-keys: failed to decode key at index 0: illegal base64 data at input byte 3" in p.stderr, \
        p.stderr


def test_broker_refuses_bad_keys_at_start(cluster):
    b = cluster.start(wait=False, extra=["--broker.auth-keys", "AA=="])
    assert b.proc.wait(20) != 0
    assert "at least one key must be provided" in b.logtail()


def http(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_http_gateways(secured):
    _, brokers, _ = secured
    addr = brokers[0].address
    # The /<journal> gateway signs its own loopback call (Gazette's quirk:
    # the caller's header is not what authorizes it).
    status, _ = http("PUT", addr + "/auth/b", b"over http\n")
    assert status == 204
    status, body = http("GET", addr + "/auth/b?offset=0")
    assert status == 206 and b"over http\n" in body
    # /v1/ forwards the caller's Authorization to the gRPC call.
    status, body = http("POST", addr + "/v1/journals/list", b"{}")
    assert b"missing or empty Authorization token" in body, (status, body)
    status, body = http("POST", addr + "/v1/journals/list", b"{}", {"Authorization": token(LIST, ["auth/b"])})
    assert status == 200 and b"auth/b" in body and b"auth/a" not in body, body


def test_allow_missing_for_rollouts(cluster):
    b = cluster.start(extra=["--broker.auth-keys", "AA== " + base64.b64encode(KEY1).decode()])
    c = Client(b.address)  # no header at all
    c.apply(spec("roll/a"))
    wait_assigned(c, "roll/a")
    assert c.append("roll/a", b"no token\n").status == pb.OK
    # A header that is there is still verified.
    refused(lambda: Client(b.address, auth=token(READ, key=b"bad")).read("roll/a", timeout=10),
            "verifying Authorization: token signature is invalid: signature is invalid")


def test_a_call_ends_at_its_tokens_expiry(secured):
    _, brokers, _ = secured
    c = Client(brokers[0].address, auth=token(READ, ["auth/a"], ttl=3))
    start = time.time()
    with pytest.raises(grpc.RpcError) as e:
        for _ in c.read_stream("auth/a"):  # blocks at the write head
            pass
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value
    assert 1 < time.time() - start < 15


# ---- the consumer's Shard service, and its broker client -------------------------------

def shard_token(cap, ids=()):
    """A minute's claims over shards by id, as Gazette's shard clients sign."""
    return token(cap, ttl=60, labels=[("id", i) for i in ids])


def test_consumer_shard_service_and_broker_client(cluster, postgres):
    import consumer_pb2 as cpb
    from test_consumer import Consumer, Group, Shards, shard_spec, stat_read_through

    class AuthShards(Shards):
        def __init__(self, address, auth=None):
            super().__init__(address)
            self.auth = auth

        def call(self, method, req, resp, timeout=30):
            md = [("authorization", self.auth)] if self.auth else None
            return self.ch.unary_unary("/consumer.Shard/" + method, request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=resp.FromString)(req, timeout=timeout, metadata=md)

    class SecureGroup(Group):
        def __init__(self):
            self.cluster, self.postgres = cluster, postgres
            self.prefix = cluster.prefix + "-consumers/chain"
            self.broker = cluster.start(extra=["--broker.auth-keys", KEYS])
            self.client = Client(self.broker.address, auth=signer())
            self.consumers, self.seq = [], 0

    g = SecureGroup()
    try:
        g.journals("sec/src", "sec/out")
        keys_env = {"CONSUMER_AUTH_KEYS": KEYS, "BROKER_AUTH_KEYS": KEYS}
        c = Consumer(g, env=keys_env)
        g.consumers.append(c)
        c.start()
        admin = AuthShards(c.address, shard_token(ALL))
        assert admin.apply(shard_spec("sec-shard", ["sec/src"], "sec/out")).status == cpb.OK
        admin.apply(shard_spec("other-shard", ["sec/src"], "sec/out"), expect=0)

        refused(lambda: AuthShards(c.address).list(), "missing or empty Authorization token")
        refused(lambda: AuthShards(c.address, shard_token(READ)).list(),
                "authorization is missing required LIST capability")
        refused(lambda: AuthShards(c.address, shard_token(LIST)).stat("sec-shard"),
                "authorization is missing required READ capability")
        only = AuthShards(c.address, shard_token(ALL, ["sec-shard"]))
        assert [s.spec.id for s in only.list().shards] == ["sec-shard"]
        assert only.stat("other-shard").status == cpb.SHARD_NOT_FOUND
        refused(lambda: only.apply(shard_spec("other-shard", ["sec/src"], "sec/out"), expect=-1),
                "not authorized to other-shard")
        refused(lambda: only.unassign("other-shard"), "not authorized to other-shard")

        # The consumer reads and appends through the broker with tokens it
        # signs (--broker.auth-keys): a message published to the source
        # is read through.
        data = b'{"_meta":{"uuid":"9f2952f3-c6a3-11ea-8802-080607050309"},"id":1,"hops":0}\n'
        gazctl(GAZCTL, g.broker.address, "journals", "append", "-l", "name=sec/src", stdin=data,
               env_extra={"BROKER_AUTH_KEYS": KEYS})
        st = stat_read_through(AuthShards(c.address, shard_token(READ, ["sec-shard"])), "sec-shard", "sec/src",
                               len(data), timeout=60)
        assert st.status == cpb.OK, st
        # Gazette's gazctl, signing with the consumer's keys.
        p = gazctl(GO_GAZCTL, g.broker.address, "shards", "list", "--consumer.address", c.address,
                   "--consumer.auth-keys", base64.b64encode(KEY1).decode())
        assert b"sec-shard" in p.stdout, p.stdout
    finally:
        g.stop()
