"""TLS on every hop (facts §8.2): the broker's one port under TLS (gRPC and
HTTP/1), mutual TLS, peer TLS between brokers (ours and Gazette's), etcd
over TLS, client certificates from gazctl (ours and Gazette's), and a
server certificate rotated on disk without a restart.

Certificates are made here with the openssl CLI: a CA, a server
certificate for 127.0.0.1/localhost, a client certificate, and a second CA
with a client certificate of its own (the wrong-CA case)."""
import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import pytest
from cryptography import x509

from conftest import ETCD_BIN, ETCDCTL_BIN, GAZCTL, GAZETTE, GO_GAZCTL, Cluster, Etcd, free_port, wait_for

SPECS = """
name: tls/
replication: %d
fragment:
  length: 65536
  compression_codec: NONE
  stores:
    - file:///
  refresh_interval: 1s
children:
  - name: tls/one
"""


class PKI:
    """Certificates under `dir`: make(name, ca) signs `name` by `ca`
    (self-signed when name == ca). Returns (crt, key) paths."""

    def __init__(self, d):
        self.dir = d

    def path(self, name, ext):
        return os.path.join(self.dir, "%s.%s" % (name, ext))

    def make(self, name, ca, cn=None, days=2):
        crt, key = self.path(name, "crt"), self.path(name, "key")
        subj = "/CN=%s" % (cn or name)
        tmp_crt, tmp_key = crt + ".new", key + ".new"
        common = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", tmp_key,
                  "-subj", subj]
        if name == ca:
            run(["openssl", "req", "-x509"] + common + ["-out", tmp_crt, "-days", str(days)])
        else:
            csr, ext = self.path(name, "csr"), self.path(name, "ext")
            with open(ext, "w") as f:
                f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n")
            run(["openssl", "req"] + common + ["-out", csr])
            run(["openssl", "x509", "-req", "-in", csr, "-CA", self.path(ca, "crt"), "-CAkey",
                 self.path(ca, "key"), "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
                 "-out", tmp_crt, "-days", str(days), "-extfile", ext])
        # Both files replaced by rename, key first: a reader sees old or new.
        os.rename(tmp_key, key)
        os.rename(tmp_crt, crt)
        return crt, key

    def serial(self, name):
        return x509.load_pem_x509_certificate(open(self.path(name, "crt"), "rb").read()).serial_number


def run(args):
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, "%s failed: %s" % (args, p.stderr)


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="gaz-tls-")
    p = PKI(d)
    p.make("ca", "ca")
    p.make("server", "ca")
    p.make("client", "ca")
    p.make("ca2", "ca2")
    p.make("other", "ca2")  # a client certificate of another CA
    yield p
    shutil.rmtree(d, ignore_errors=True)


def server_flags(pki, mutual=False, peer=True):
    f = ["--broker.server-cert-file", pki.path("server", "crt"),
         "--broker.server-cert-key-file", pki.path("server", "key")]
    if mutual:
        f += ["--broker.server-ca-file", pki.path("ca", "crt")]
    if peer:
        f += ["--broker.peer-cert-file", pki.path("client", "crt"),
              "--broker.peer-cert-key-file", pki.path("client", "key"),
              "--broker.peer-ca-file", pki.path("ca", "crt")]
    return f


def client_flags(pki, cert="client", ca="ca"):
    f = ["--broker.trusted-ca-file", pki.path(ca, "crt")]
    if cert:
        f += ["--broker.cert-file", pki.path(cert, "crt"), "--broker.cert-key-file", pki.path(cert, "key")]
    return f


def tls_broker(cluster, pki, mutual=False, go=False, **kw):
    b = cluster.start(go=go, extra=server_flags(pki, mutual) + list(kw.pop("extra", ())), **kw)
    b.address = "https://127.0.0.1:%d" % b.port
    return b


def gazctl(exe, address, flags, *args, stdin=None, check=True, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env["HOME"] = "/nonexistent"
    p = subprocess.run([exe] + list(args) + ["--broker.address", address] + list(flags), input=stdin,
                       capture_output=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s %s failed (%d): %s" % (exe, args, p.returncode, p.stderr.decode()))
    return p


def apply_and_wait(exe, address, flags, tmp_path, replication=1):
    specs = tmp_path / "specs.yaml"
    specs.write_text(SPECS % replication)
    gazctl(exe, address, flags, "journals", "apply", "--specs", str(specs))

    def routed():
        out = json.loads(gazctl(GAZCTL, address, flags, "journals", "list", "-o", "json").stdout)
        js = out.get("journals", [])
        return js and all(len(j.get("route", {}).get("members", [])) == replication and
                          j["route"].get("primary", -1) >= 0 for j in js)
    wait_for(routed, 30, "tls/one to be routed")
    return json.loads(gazctl(GAZCTL, address, flags, "journals", "list", "-o", "json").stdout)


def refused(exe, address, flags):
    """Whether `gazctl journals list` fails: ours exits 1; Gazette's keeps
    redialing a broker that refuses its handshake, so 8 s without an
    answer counts as refused too."""
    try:
        return gazctl(exe, address, flags, "journals", "list", check=False, timeout=8).returncode != 0
    except subprocess.TimeoutExpired:
        return exe == GO_GAZCTL


def append_read(exe, address, flags, data):
    gazctl(exe, address, flags, "journals", "append", "-l", "name=tls/one", stdin=data)
    return gazctl(exe, address, flags, "journals", "read", "-l", "name=tls/one").stdout


# ---- the one port under TLS ----------------------------------------------------------


def test_gazctls_append_and_read_over_tls(cluster, pki, tmp_path):
    """Our gazctl and Gazette's append and read over https:// with a
    trusted CA; the broker advertises https:// in its route endpoints (as
    Gazette's server.New). Plain HTTP/2 to the TLS port is refused."""
    b = tls_broker(cluster, pki)
    flags = client_flags(pki, cert=None)
    listing = apply_and_wait(GAZCTL, b.address, flags, tmp_path)
    assert listing["journals"][0]["route"]["endpoints"] == [b.address]
    out = append_read(GAZCTL, b.address, flags, b"ours\n")
    assert out == b"ours\n"
    out = append_read(GO_GAZCTL, b.address, flags, b"theirs\n")
    assert out == b"ours\ntheirs\n"
    # Without the CA (system roots only) the certificate is not trusted.
    assert refused(GAZCTL, b.address, [])
    # The plain scheme on the TLS port gets no service.
    assert refused(GAZCTL, "http://127.0.0.1:%d" % b.port, [])


def test_mutual_tls_refuses_clients_without_a_trusted_certificate(cluster, pki, tmp_path):
    """--broker.server-ca-file makes client certificates required: a
    client with one of that CA is served; one without a certificate and
    one with a certificate of another CA are refused, by our gazctl,
    Gazette's and curl alike."""
    b = tls_broker(cluster, pki, mutual=True)
    good = client_flags(pki)
    apply_and_wait(GAZCTL, b.address, good, tmp_path)
    assert append_read(GAZCTL, b.address, good, b"m\n") == b"m\n"
    assert append_read(GO_GAZCTL, b.address, good, b"n\n") == b"m\nn\n"
    for exe in (GAZCTL, GO_GAZCTL):
        for flags in (client_flags(pki, cert=None), client_flags(pki, cert="other")):
            assert refused(exe, b.address, flags), (exe, flags)
    url = b.address + "/debug/ready"
    ok = subprocess.run(["curl", "-sS", "--cacert", pki.path("ca", "crt"), "--cert", pki.path("client", "crt"),
                         "--key", pki.path("client", "key"), url], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(["curl", "-sS", "--cacert", pki.path("ca", "crt"), url], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "TLS handshake failed" in open(b.logpath).read()


def test_http_gateway_on_the_tls_port(cluster, pki, tmp_path):
    """HTTP/1 (debug endpoints, the read gateway, /v1) shares the TLS port
    with gRPC: curl with --cacert negotiates http/1.1 by ALPN."""
    b = tls_broker(cluster, pki, mutual=True)
    flags = client_flags(pki)
    apply_and_wait(GAZCTL, b.address, flags, tmp_path)
    gazctl(GAZCTL, b.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"gateway bytes\n")
    curl = ["curl", "-sS", "--cacert", pki.path("ca", "crt"), "--cert", pki.path("client", "crt"),
            "--key", pki.path("client", "key"), "-w", "\n%{http_version} %{http_code}"]
    out = subprocess.run(curl + [b.address + "/debug/ready"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.endswith("1.1 200"), (out.stdout, out.stderr)
    # The gateway reads through the broker's own gRPC service, over TLS.
    out = subprocess.run(curl + [b.address + "/tls/one?offset=0"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("gateway bytes\n"), (out.stdout, out.stderr)
    out = subprocess.run(curl + ["-X", "POST", "-d", '{"journal": "tls/one", "offset": 0}',
                                 b.address + "/v1/journals/read"], capture_output=True, text=True)
    assert out.returncode == 0 and '"content"' in out.stdout and out.stdout.endswith(" 200"), out.stdout
    m = subprocess.run(curl + [b.address + "/debug/metrics"], capture_output=True, text=True)
    assert "gazette_journal_server_started_totals" in m.stdout


def test_gazload_over_mutual_tls(cluster, pki, tmp_path):
    """gazload (the e2e's load) appends and verifies over mutual TLS with
    its TLS files from flags or from $BROKER_TRUSTED_CA_FILE,
    $BROKER_CERT_FILE and $BROKER_CERT_KEY_FILE (the e2e's load pods use
    those); without a client certificate every append is refused."""
    from test_client import GAZLOAD, gazload_summary
    b = tls_broker(cluster, pki, mutual=True)
    apply_and_wait(GAZCTL, b.address, client_flags(pki), tmp_path)
    args = [GAZLOAD, "--broker.address", b.address, "--journals", "tls/one", "--size", "100",
            "--pause", "5ms", "--duration", "1s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    tls_env = dict(env, BROKER_TRUSTED_CA_FILE=pki.path("ca", "crt"), BROKER_CERT_FILE=pki.path("client", "crt"),
                   BROKER_CERT_KEY_FILE=pki.path("client", "key"))
    for how, extra, e in (("flags", client_flags(pki), env), ("env", [], tls_env)):
        r = subprocess.run(args + extra, capture_output=True, env=e, timeout=60)
        assert r.returncode == 0, (how, r.stdout, r.stderr)
        s = gazload_summary(r.stdout)
        assert s["acknowledged"] > 10 and s["failed"] == 0 and s["lost"] == 0, (how, s)
    r = subprocess.run(args + ["--stop-grace", "5s"] + client_flags(pki, cert=None), capture_output=True,
                       env=env, timeout=60)
    assert r.returncode != 0, r
    assert gazload_summary(r.stdout)["acknowledged"] == 0, r.stdout
    # A certificate without its key is a usage error, before any append.
    r = subprocess.run(args + ["--broker.cert-file", pki.path("client", "crt")], capture_output=True, env=env,
                       timeout=30)
    assert r.returncode == 2 and b"key file" in r.stderr, r


# ---- peers --------------------------------------------------------------------------


def test_replication_and_proxying_over_peer_tls(cluster, pki, tmp_path):
    """Three of our brokers under mutual TLS with peer certificates: a
    journal of replication 2 is appended through each broker (the one that
    is not a member proxies) and read back through each."""
    brokers = [tls_broker(cluster, pki, mutual=True, zone="z%d" % i) for i in range(3)]
    flags = client_flags(pki)
    listing = apply_and_wait(GAZCTL, brokers[0].address, flags, tmp_path, replication=2)
    route = listing["journals"][0]["route"]
    assert all(e.startswith("https://") for e in route["endpoints"])
    members = {m["suffix"] for m in route["members"]}
    assert len(members) == 2 and any(b.id not in members for b in brokers)
    want = b""
    for i, b in enumerate(brokers):
        line = b"via %d\n" % i
        gazctl(GAZCTL, b.address, flags, "journals", "append", "-l", "name=tls/one", stdin=line)
        want += line
    for b in brokers:
        assert gazctl(GAZCTL, b.address, flags, "journals", "read", "-l", "name=tls/one").stdout == want


@pytest.mark.parametrize("tokens", [False, True], ids=["tls", "tls-and-tokens"])
def test_mixed_cluster_with_gazettes_broker_over_tls(cluster, pki, tmp_path, tokens):
    """Gazette's broker and ours, both under mutual TLS with peer
    certificates, replicate one journal between them; appends and reads go
    through either, with both gazctls. With auth keys too (the production
    set-up) replication and proxying carry the brokers' own tokens over
    peer TLS, the gazctls sign with the keys, and an unsigned call is
    refused."""
    keys = ["--broker.auth-keys", base64.b64encode(b"tls and tokens key").decode()] if tokens else []
    ours = tls_broker(cluster, pki, mutual=True, zone="z0", extra=keys)
    go = tls_broker(cluster, pki, mutual=True, go=True, zone="z1", extra=keys)
    flags = client_flags(pki) + keys
    listing = apply_and_wait(GAZCTL, ours.address, flags, tmp_path, replication=2)
    assert sorted(listing["journals"][0]["route"]["endpoints"]) == sorted([ours.address, go.address])
    gazctl(GAZCTL, go.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"to go\n")
    gazctl(GO_GAZCTL, ours.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"to ours\n")
    for b in (ours, go):
        for exe in (GAZCTL, GO_GAZCTL):
            out = gazctl(exe, b.address, flags, "journals", "read", "-l", "name=tls/one").stdout
            assert out == b"to go\nto ours\n", (b.go, exe)
    if tokens:
        p = gazctl(GAZCTL, ours.address, client_flags(pki), "journals", "list", check=False)
        assert p.returncode != 0 and b"missing or empty Authorization token" in p.stderr, p.stderr


# ---- etcd over TLS ------------------------------------------------------------------


class TlsEtcd(Etcd):
    """etcd serving clients over TLS, requiring client certificates."""

    def __init__(self, pki):
        self.pki = pki
        super().__init__()

    def _spawn(self):
        self.endpoint = "https://127.0.0.1:%d" % self.cport
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        p = self.pki
        self.proc = subprocess.Popen(
            [ETCD_BIN, "--name", "gaz", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--cert-file", p.path("server", "crt"), "--key-file", p.path("server", "key"),
             "--client-cert-auth", "--trusted-ca-file", p.path("ca", "crt"),
             "--listen-peer-urls", "http://127.0.0.1:%d" % self.pport,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.pport,
             "--initial-cluster", "gaz=http://127.0.0.1:%d" % self.pport,
             "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def tls_args(self):
        p = self.pki
        return ["--cacert", p.path("ca", "crt"), "--cert", p.path("client", "crt"), "--key", p.path("client", "key")]

    def healthy(self):
        r = subprocess.run(["curl", "-fsS"] + self.tls_args() + [self.endpoint + "/health"], capture_output=True,
                           text=True, timeout=5)
        return '"health":"true"' in r.stdout

    def ctl(self, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL_BIN, "--endpoints", self.endpoint] + self.tls_args() + list(args),
                              capture_output=True, text=True, env=env, check=True).stdout


def etcd_flags(pki, cert="client"):
    f = ["--etcd.trusted-ca-file", pki.path("ca", "crt")]
    if cert:
        f += ["--etcd.cert-file", pki.path(cert, "crt"), "--etcd.cert-key-file", pki.path(cert, "key")]
    return f


def test_broker_and_gazctl_with_etcd_over_tls(pki, tmp_path):
    """An etcd serving TLS with client-cert-auth: our broker (with
    --etcd.cert-file, --etcd.cert-key-file, --etcd.trusted-ca-file and an
    https:// address) announces, serves gazctl over its own TLS port, and
    its member key is in that etcd. A broker without a client certificate
    never announces (etcd refuses it)."""
    etcd = TlsEtcd(pki)
    c = Cluster(etcd, str(tmp_path))
    try:
        b = tls_broker(c, pki, extra=etcd_flags(pki))
        flags = client_flags(pki, cert=None)
        apply_and_wait(GAZCTL, b.address, flags, tmp_path)
        assert append_read(GAZCTL, b.address, flags, b"etcd tls\n") == b"etcd tls\n"
        assert b.member_key() in etcd.ctl("get", "--prefix", c.prefix, "--keys-only")
        nocert = c.start(wait=False, extra=etcd_flags(pki, cert=None))
        time.sleep(4)
        assert nocert.proc.poll() is None  # waiting for etcd, as it does for one that is down
        assert nocert.member_key() not in etcd.ctl("get", "--prefix", c.prefix, "--keys-only")
        assert "etcd is unavailable" in open(nocert.logpath).read()
    finally:
        try:
            c.stop_all()
        finally:
            etcd.stop()


def test_rotated_etcd_certificates_are_used_without_restart(tmp_path):
    """The whole etcd PKI is replaced on disk (a new CA, etcd's server
    certificate and the broker's client certificate from it, written over
    the same files) and etcd restarted trusting only the new CA: the
    broker's etcd client reconnects with the new files (its old
    certificate and roots would be refused and would refuse), keeps its
    member key and takes new JournalSpecs, without a restart."""
    p = PKI(str(tmp_path / "pki"))
    os.makedirs(p.dir)
    for name in ("ca", "server", "client"):
        p.make(name, "ca")
    etcd = TlsEtcd(p)
    c = Cluster(etcd, str(tmp_path))
    try:
        b = c.start(extra=etcd_flags(p))
        apply_and_wait(GAZCTL, b.address, [], tmp_path)
        old_serial = p.serial("client")
        for name in ("ca", "server", "client"):
            p.make(name, "ca")
        assert p.serial("client") != old_serial
        etcd.restart(sig=signal.SIGTERM)
        specs = tmp_path / "rotated.yaml"
        specs.write_text(SPECS.replace("tls/one", "tls/after-rotation") % 1)
        # Applied through the broker, whose etcd client reconnects (with the
        # new files) within its back-off and the files' refresh period.
        wait_for(lambda: gazctl(GAZCTL, b.address, [], "journals", "apply", "--specs", str(specs),
                                check=False).returncode == 0, 30, "an apply through the broker after the rotation")

        def routed():
            out = json.loads(gazctl(GAZCTL, b.address, [], "journals", "list", "-o", "json").stdout)
            return any(j["spec"]["name"] == "tls/after-rotation" and j.get("route", {}).get("primary", -1) >= 0
                       for j in out.get("journals", []))
        wait_for(routed, 30, "a journal applied after the rotation to be assigned (the broker reads etcd again)")
        assert b.proc.poll() is None
        assert b.member_key() in etcd.ctl("get", "--prefix", c.prefix, "--keys-only")
    finally:
        try:
            c.stop_all()
        finally:
            etcd.stop()


# ---- bad flags and rotation -----------------------------------------------------------


@pytest.mark.parametrize("case", ["no-key", "ca-without-cert", "missing-file", "wrong-key", "peer-missing",
                                  "etcd-missing"])
def test_bad_tls_flags_are_clear_errors(cluster, pki, case):
    """Every TLS flag is checked at start: a broker with a half or
    unreadable configuration exits 1 naming the file or flag."""
    p = pki
    extra, want = {
        "no-key": (["--broker.server-cert-file", p.path("server", "crt")], "--broker.server-cert-key-file"),
        "ca-without-cert": (["--broker.server-ca-file", p.path("ca", "crt")], "--broker.server-ca-file"),
        "missing-file": (["--broker.server-cert-file", "/nonexistent/s.crt", "--broker.server-cert-key-file",
                          p.path("server", "key")], "/nonexistent/s.crt"),
        "wrong-key": (["--broker.server-cert-file", p.path("server", "crt"), "--broker.server-cert-key-file",
                       p.path("client", "key")], p.path("client", "key")),
        "peer-missing": (["--broker.peer-ca-file", "/nonexistent/ca.crt"], "/nonexistent/ca.crt"),
        "etcd-missing": (["--etcd.cert-file", "/nonexistent/e.crt", "--etcd.cert-key-file",
                          p.path("client", "key"), "--etcd.address", "https://127.0.0.1:1"], "/nonexistent/e.crt"),
    }[case]
    b = cluster.start(wait=False, extra=extra)
    rc = b.proc.wait(30)
    assert rc == 1
    assert want in open(b.logpath).read(), b.logtail()


def test_gazctl_bad_tls_files_are_clear_errors(pki, tmp_path):
    for flags, want in ((["--broker.trusted-ca-file", "/nonexistent/ca.crt"], "/nonexistent/ca.crt"),
                        (["--broker.cert-file", pki.path("client", "crt")], "key file"),
                        (["--broker.trusted-ca-file", pki.path("client", "key")], "no PEM certificate")):
        p = gazctl(GAZCTL, "https://127.0.0.1:%d" % free_port(), flags, "journals", "list", check=False)
        assert p.returncode == 1 and want in p.stderr.decode(), p.stderr


def served_serial(port):
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def test_rotated_server_certificate_is_served_without_restart(cluster, pki, tmp_path):
    """The server certificate replaced on disk (new key, serial and CN) is
    served to the next connection (checked at most once a second); a file
    that does not load then keeps the last good certificate. gazctl keeps
    working across both."""
    d = tmp_path / "rot"
    d.mkdir()
    rot = PKI(str(d))
    for f in ("ca.crt", "ca.key"):
        shutil.copy(pki.path(*f.split(".")), str(d / f))
    rot.make("server", "ca", cn="first")
    b = cluster.start(extra=["--broker.server-cert-file", rot.path("server", "crt"),
                             "--broker.server-cert-key-file", rot.path("server", "key")])
    b.address = "https://127.0.0.1:%d" % b.port
    flags = client_flags(pki, cert=None)
    first = rot.serial("server")
    assert served_serial(b.port) == first
    apply_and_wait(GAZCTL, b.address, flags, tmp_path)
    rot.make("server", "ca", cn="second")
    second = rot.serial("server")
    assert second != first
    wait_for(lambda: served_serial(b.port) == second, 10, "the rotated certificate to be served")
    assert append_read(GAZCTL, b.address, flags, b"after rotation\n") == b"after rotation\n"
    # A broken certificate file: the last good one stays.
    with open(rot.path("server", "crt"), "w") as f:
        f.write("not a certificate\n")
    # Files are checked when a connection comes: each probe is one.
    wait_for(lambda: served_serial(b.port) == second and "do not load" in open(b.logpath).read(), 10,
             "the bad file to be noticed")
    assert gazctl(GAZCTL, b.address, flags, "journals", "read", "-l", "name=tls/one").stdout == b"after rotation\n"


def test_silent_client_is_dropped_after_the_handshake_timeout(cluster, pki):
    """A client that connects and sends nothing holds no thread past the
    7.5 s handshake bound: the broker closes the connection."""
    b = tls_broker(cluster, pki)
    s = socket.create_connection(("127.0.0.1", b.port))
    s.settimeout(20)
    t0 = time.time()
    assert s.recv(1) == b""  # closed by the broker
    assert 5 < time.time() - t0 < 15
    s.close()
    assert "timed out" in open(b.logpath).read()


# ---- the consumer runtime ------------------------------------------------------------


def test_consumer_serves_and_dials_over_tls(cluster, pki, postgres, tmp_path):
    """Our consumer runtime (bin/chain-consumer) under TLS: its own port
    with --consumer.server-cert-file (mutual, with --consumer.server-ca-file),
    its brokers over https:// with --broker.cert-file and its CA. Gazette's
    gazctl and ours apply and list its shards over https://; the shard's
    primary reads its source through the TLS broker."""
    from conftest import BIN
    b = tls_broker(cluster, pki, mutual=True)
    bflags = client_flags(pki)
    specs = tmp_path / "specs.yaml"
    specs.write_text("name: chain/\nreplication: 1\nlabels:\n  - name: content-type\n"
                     "    value: application/x-ndjson\nfragment:\n  length: 65536\n"
                     "  compression_codec: NONE\n  stores: [file:///]\n  refresh_interval: 1s\n"
                     "children:\n  - name: chain/in\n  - name: chain/out\n")
    gazctl(GAZCTL, b.address, bflags, "journals", "apply", "--specs", str(specs))
    port = free_port()
    address = "https://127.0.0.1:%d" % port
    prefix = cluster.prefix + "-consumers/tls"
    p = pki
    args = [os.path.join(BIN, "chain-consumer"), "serve", "--consumer.port", str(port), "--consumer.host", "127.0.0.1",
            "--consumer.id", "tls-c", "--etcd.address", cluster.etcd.endpoint, "--etcd.prefix", prefix,
            "--etcd.lease", "3s", "--broker.address", b.address, "--log.level", "info",
            "--consumer.exit-timeout", "3s", "--chain.postgres", postgres.conninfo,
            "--consumer.server-cert-file", p.path("server", "crt"), "--consumer.server-cert-key-file",
            p.path("server", "key"), "--consumer.server-ca-file", p.path("ca", "crt"),
            "--consumer.peer-cert-file", p.path("client", "crt"), "--consumer.peer-cert-key-file",
            p.path("client", "key"), "--consumer.peer-ca-file", p.path("ca", "crt"),
            "--broker.cert-file", p.path("client", "crt"), "--broker.cert-key-file", p.path("client", "key"),
            "--broker.trusted-ca-file", p.path("ca", "crt")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_"))}
    logpath = str(tmp_path / "consumer.log")
    proc = subprocess.Popen(args, stdout=open(logpath, "a"), stderr=subprocess.STDOUT, env=env)
    cflags = ["--consumer.address", address, "--consumer.trusted-ca-file", p.path("ca", "crt"),
              "--consumer.cert-file", p.path("client", "crt"), "--consumer.cert-key-file", p.path("client", "key")]
    try:
        key = "%s/members/local#tls-c" % prefix
        wait_for(lambda: proc.poll() is None and key in cluster.etcd.ctl("get", "--prefix", prefix, "--keys-only"),
                 30, "the consumer to announce")
        assert address in cluster.etcd.ctl("get", key, "--print-value-only")
        yaml = ("common:\n  max_txn_duration: 1s\n  labels:\n    - name: chain.output\n"
                "      value: chain/out\nshards:\n  - id: tls-0\n    sources:\n      - journal: chain/in\n")
        r = gazctl(GO_GAZCTL, b.address, bflags + cflags, "shards", "apply", stdin=yaml.encode())
        assert r.returncode == 0

        def primary():
            out = gazctl(GAZCTL, b.address, bflags + cflags, "shards", "list", "-o", "json").stdout
            shards = json.loads(out).get("shards", [])
            return shards and any(s.get("code") == "PRIMARY" for s in shards[0].get("status", []))
        wait_for(primary, 60, "shard tls-0 to have a primary")
        out = json.loads(gazctl(GAZCTL, b.address, bflags + cflags, "shards", "list", "-o", "json").stdout)
        assert out["shards"][0]["route"]["endpoints"] == [address]
        # Without a client certificate the consumer's port refuses.
        nocert = ["--consumer.address", address, "--consumer.trusted-ca-file", p.path("ca", "crt")]
        r = gazctl(GAZCTL, b.address, bflags + nocert, "shards", "list", check=False, timeout=30)
        assert r.returncode != 0
    finally:
        proc.terminate()
        proc.wait(60)


def test_rotated_peer_certificate_is_used_by_new_peer_channels(cluster, pki, tmp_path):
    """--broker.peer-cert-file rotated on disk: the broker makes its peer
    channels again with the new files (checked at most once a second) and
    replication goes on; a peer certificate of an untrusted CA then makes
    the proxied appends fail, and the good one restored heals them."""
    d = tmp_path / "peer"
    d.mkdir()
    rot = PKI(str(d))
    for f in ("ca.crt", "ca.key", "ca2.crt", "ca2.key"):
        shutil.copy(pki.path(*f.split(".")), str(d / f))
    rot.make("peer", "ca")
    peer = ["--broker.peer-cert-file", rot.path("peer", "crt"), "--broker.peer-cert-key-file",
            rot.path("peer", "key"), "--broker.peer-ca-file", pki.path("ca", "crt")]
    brokers = [cluster.start(zone="z%d" % i, extra=server_flags(pki, mutual=True, peer=False) + peer)
               for i in range(2)]
    for b in brokers:
        b.address = "https://127.0.0.1:%d" % b.port
    flags = client_flags(pki)
    route = apply_and_wait(GAZCTL, brokers[0].address, flags, tmp_path, replication=2)["journals"][0]["route"]
    # Appends through the member that is not primary are proxied: each
    # opens a stream on the peer channel of the moment.
    entry = next(b for b in brokers if b.address != route["endpoints"][route.get("primary", 0)])
    gazctl(GAZCTL, entry.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"one\n")
    rot.make("peer", "ca")
    time.sleep(1.2)
    gazctl(GAZCTL, entry.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"two\n")
    logs = "".join(open(b.logpath).read() for b in brokers)
    assert "peer TLS files changed; new channel" in logs
    # An untrusted peer certificate: the new channels' handshakes fail.
    rot.make("peer", "ca2")
    time.sleep(1.2)
    p = gazctl(GAZCTL, entry.address, flags, "journals", "append", "-l", "name=tls/one", stdin=b"bad\n",
               check=False, timeout=20)
    failed = p.returncode != 0
    rot.make("peer", "ca")
    time.sleep(1.2)
    for b in brokers:
        wait_for(lambda: gazctl(GAZCTL, b.address, flags, "journals", "append", "-l", "name=tls/one",
                                stdin=b"healed\n", check=False, timeout=20).returncode == 0, 60,
                 "appends to heal")
    out = gazctl(GAZCTL, brokers[1].address, flags, "journals", "read", "-l", "name=tls/one").stdout
    assert out.startswith(b"one\ntwo\n") and out.endswith(b"healed\nhealed\n"), out
    # The untrusted certificate was presented: the proxied or replicated
    # append through a new channel failed.
    assert failed and b"bad\n" not in out, (p.stderr, out)
