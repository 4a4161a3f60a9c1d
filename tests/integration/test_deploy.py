"""Deployment artifacts against real tools: the Helm chart (charts/gazette-c)
linted and rendered by helm (built by scripts/deps.sh), what it renders
applied to the real kube-apiserver with a server-side dry run (validation,
defaulting and admission, nothing stored), and the least-privilege RBAC
manifest (deploy/rbac.yaml): applied for real, checked grant by grant, and
sufficient for gazette-operator running under it with drains and the PDB."""
import base64
import json
import os
import re
import subprocess
import urllib.request
import uuid

import pytest
import yaml

import protocol_pb2 as pb
from conftest import CRDS, GAZETTE, OPERATOR, ROOT, Operator, wait_for
from gazpb import Client, spec, wait_assigned

CHART = os.path.join(ROOT, "charts/gazette-c")
RBAC = os.path.join(ROOT, "deploy/rbac.yaml")
HELM = os.path.join(subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--helm-dir"],
                                            text=True).strip(), "helm")
KUBE_VERSION = "1.35.0"
MONITORING_CRDS = subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--monitoring-dir"],
                                          text=True).strip()
KUBECONFORM = os.path.join(subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--kubeconform-dir"],
                                                   text=True).strip(), "kubeconform")
MONITORING = ("monitoring.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true",
              "monitoring.dashboard.enabled=true")


def helm(*args, check=True):
    if not os.access(HELM, os.X_OK):
        pytest.fail("no helm at %s: run scripts/deps.sh" % HELM)
    r = subprocess.run([HELM] + list(args), capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HELM_CACHE_HOME="/tmp/gaz-helm-cache",
                                HELM_CONFIG_HOME="/tmp/gaz-helm-config", HELM_DATA_HOME="/tmp/gaz-helm-data"))
    if check and r.returncode:
        raise AssertionError("helm %s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def render(*sets, namespace="gazette", include_crds=False, values=None):
    args = ["template", "rel", CHART, "--namespace", namespace, "--kube-version", KUBE_VERSION]
    for s in sets:
        args += ["--set", s]
    for v in ([values] if isinstance(values, str) else values or []):
        args += ["-f", v]
    if include_crds:
        args.append("--include-crds")
    text = helm(*args).stdout
    return text, [d for d in yaml.safe_load_all(text) if d]


def find(docs, kind, suffix=""):
    got = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    assert len(got) == 1, (kind, suffix, [d["metadata"]["name"] for d in docs])
    return got[0]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_chart_lints_strict():
    r = helm("lint", "--strict", CHART, "--kube-version", KUBE_VERSION)
    assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout, r.stdout


def test_chart_crds_are_the_projects():
    """Helm installs charts/gazette-c/crds/; they must be crds/ byte for byte."""
    names = sorted(os.listdir(CRDS))
    assert sorted(os.listdir(os.path.join(CHART, "crds"))) == names
    for n in names:
        assert open(os.path.join(CRDS, n), "rb").read() == open(os.path.join(CHART, "crds", n), "rb").read(), n


def test_broker_deployment_gives_the_hand_off_time():
    _, docs = render()
    dep = find(docs, "Deployment", "-broker")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = env_of(c)
    # Broker id = pod name (the operator's pod -> member mapping).
    assert env["BROKER_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["BROKER_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["ETCD_ADDRESS"] == "http://etcd:2379" and env["ETCD_PREFIX"] == "/gazette/cluster"
    # SIGTERM's hand-off is bounded by --broker.exit-timeout (2m): the
    # grace period is derived from it, the preStop sleep and the persist
    # time after it.
    assert env["BROKER_EXIT_TIMEOUT"] == "2m"
    assert pod["terminationGracePeriodSeconds"] == 5 + 120 + 300
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/debug/ready", "port": "http"}
    # Liveness waits for the announcement; a rollout surges, never below
    # the replica count, and is not declared stuck while a drain runs.
    assert c["startupProbe"]["httpGet"] == {"path": "/debug/ready", "port": "http"}
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert dep["spec"]["progressDeadlineSeconds"] > pod["terminationGracePeriodSeconds"]
    assert {v["name"]: v for v in pod["volumes"]}["spool"]["emptyDir"]["sizeLimit"] == "8Gi"
    assert "httpGet" not in c["livenessProbe"]  # a draining broker is not dead
    assert pod["automountServiceAccountToken"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "spool", "mountPath": env["TMPDIR"]} in c["volumeMounts"]
    # Every variable is one of the broker's flags (no typo goes unnoticed).
    help_text = subprocess.run([GAZETTE, "serve", "--help"], capture_output=True, text=True).stdout
    for name in env:
        if name != "TMPDIR":
            assert "[$%s]" % name in help_text, name


@pytest.mark.parametrize("exit_timeout,grace", [("90s", 395), ("1h30m", 5705), ("1.5s", 307),
                                                ("250ms", 306), ("2m30s", 455)])
def test_grace_period_follows_the_exit_timeout(exit_timeout, grace):
    _, docs = render("broker.exitTimeout=" + exit_timeout)
    pod = find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == grace
    # Set explicitly, it is taken as is.
    _, docs = render("broker.exitTimeout=" + exit_timeout, "broker.terminationGracePeriodSeconds=21600")
    assert find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 21600


def test_chart_etcd_is_three_members_found_by_name():
    _, docs = render()
    assert not [d for d in docs if d["kind"] == "StatefulSet"]
    _, docs = render("etcd.deploy.enabled=true")
    sts = find(docs, "StatefulSet", "-etcd")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == "rel-gazette-c-etcd-headless"
    cmd = sts["spec"]["template"]["spec"]["containers"][0]["command"]
    peers = [a for a in cmd if a.startswith("--initial-cluster=")][0].split("=", 1)[1].split(",")
    assert peers == ["rel-gazette-c-etcd-%d=http://rel-gazette-c-etcd-%d.rel-gazette-c-etcd-headless."
                     "gazette.svc:2380" % (i, i) for i in range(3)]
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert find(docs, "Service", "-etcd-headless")["spec"]["publishNotReadyAddresses"] is True
    assert find(docs, "PodDisruptionBudget", "-etcd")["spec"]["maxUnavailable"] == 1
    # Brokers and operator use it.
    for name in ("-broker", "-operator"):
        env = env_of(find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0])
        assert env["ETCD_ADDRESS"] == "http://rel-gazette-c-etcd:2379", name
    _, docs = render("etcd.deploy.enabled=true", "etcd.deploy.persistence.enabled=false")
    sts = find(docs, "StatefulSet", "-etcd")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert sts["spec"]["template"]["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]


def test_etcd_over_mutual_tls():
    """etcd.tls.existingSecret: the chart's etcd serves clients and peers
    over TLS with the Secret's certificate and requires certificates its CA
    signed from both; brokers and operator dial it over https presenting
    the same Secret (ETCD_* variables, mounted read-only); the probes stay
    on the plain metrics port. Without etcd.deploy, the variables alone."""
    _, docs = render("etcd.deploy.enabled=true", "etcd.tls.existingSecret=etcd-certs")
    sts = find(docs, "StatefulSet", "-etcd")
    c = sts["spec"]["template"]["spec"]["containers"][0]
    d = "/etc/gazette/etcd-tls"
    for flag in ("--listen-client-urls=https://0.0.0.0:2379", "--listen-peer-urls=https://0.0.0.0:2380",
                 "--cert-file=%s/tls.crt" % d, "--key-file=%s/tls.key" % d, "--trusted-ca-file=%s/ca.crt" % d,
                 "--client-cert-auth", "--peer-cert-file=%s/tls.crt" % d, "--peer-key-file=%s/tls.key" % d,
                 "--peer-trusted-ca-file=%s/ca.crt" % d, "--peer-client-cert-auth",
                 "--listen-metrics-urls=http://0.0.0.0:2381"):
        assert flag in c["command"], flag
    peers = [a for a in c["command"] if a.startswith("--initial-cluster=")][0].split("=", 1)[1].split(",")
    assert all("=https://" in p for p in peers), peers
    assert c["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert {"name": "etcd-tls", "mountPath": d, "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert vols["etcd-tls"]["projected"]["sources"][0]["secret"]["name"] == "etcd-certs"
    assert "data" not in vols  # persistence on: the claim template
    for values in (("etcd.deploy.enabled=true", "etcd.tls.existingSecret=etcd-certs"),
                   ("etcd.address=https://etcd.example:2379", "etcd.tls.existingSecret=etcd-certs")):
        _, docs = render(*values)
        for name in ("-broker", "-operator"):
            spec = find(docs, "Deployment", name)["spec"]["template"]["spec"]
            env = env_of(spec["containers"][0])
            assert env["ETCD_ADDRESS"] in ("https://rel-gazette-c-etcd:2379", "https://etcd.example:2379"), name
            assert (env["ETCD_CERT_FILE"], env["ETCD_CERT_KEY_FILE"], env["ETCD_TRUSTED_CA_FILE"]) == \
                ("%s/tls.crt" % d, "%s/tls.key" % d, "%s/ca.crt" % d), name
            assert {"name": "etcd-tls", "mountPath": d, "readOnly": True} in spec["containers"][0]["volumeMounts"]
            assert [v["name"] for v in spec["volumes"]].count("etcd-tls") == 1, name
    # Both Secrets at once: two volumes, two mounts, in the operator too.
    _, docs = render("etcd.tls.existingSecret=etcd-certs", "tls.enabled=true", "tls.existingSecret=certs")
    spec = find(docs, "Deployment", "-operator")["spec"]["template"]["spec"]
    assert sorted(v["name"] for v in spec["volumes"]) == ["etcd-tls", "tls"]
    assert sorted(m["name"] for m in spec["containers"][0]["volumeMounts"]) == ["etcd-tls", "tls"]


SECURE = ("auth.existingSecret=gazette-keys", "tls.enabled=true", "tls.existingSecret=gazette-tls",
          "tls.requireClientCerts=true", "networkPolicy.enabled=true",
          "networkPolicy.clientSelector.podSelector.matchLabels.gazette-client=broker-client",
          "networkPolicy.clientSelector.namespaceSelector.matchLabels.team=data", "etcd.deploy.enabled=true",
          "etcd.tls.existingSecret=gazette-etcd-tls")

GOLDEN = os.path.join(ROOT, "tests/integration/golden")
GOLDEN_SETS = {
    "defaults": (),
    "no-operator": ("operator.enabled=false",),
    "zones": ("broker.zoneFromPodLabel=true", "broker.replicas=5", "broker.exitTimeout=10m"),
    "etcd": ("etcd.deploy.enabled=true", "etcd.deploy.persistence.enabled=false"),
    "monitoring": MONITORING,
    "secure": SECURE + MONITORING,
}


@pytest.mark.parametrize("name", sorted(GOLDEN_SETS))
def test_rendered_chart_matches_its_golden_file(name):
    """What the chart renders for each value set, byte for byte, against
    tests/integration/golden/<name>.yaml, so every change to the output is
    seen in review. After an intended change: GAZ_UPDATE_GOLDEN=1 rewrites
    them."""
    text, _ = render(*GOLDEN_SETS[name])
    path = os.path.join(GOLDEN, name + ".yaml")
    if os.environ.get("GAZ_UPDATE_GOLDEN") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        open(path, "w").write(text)
    assert os.path.exists(path), "no golden file %s (GAZ_UPDATE_GOLDEN=1 writes it)" % path
    want = open(path).read()
    if text != want:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), path, "rendered"))
        raise AssertionError("rendered chart differs from %s (GAZ_UPDATE_GOLDEN=1 after an intended "
                             "change):\n%s" % (path, diff[:4000]))


def test_uninstall_hook_drains_the_brokers_first():
    """helm uninstall runs a pre-delete Job that scales the broker
    Deployment to 0 and waits for its pods, with a Role for exactly
    that, before the operator and its RBAC go."""
    _, docs = render()
    job = find(docs, "Job", "-uninstall")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    role = find(docs, "Role", "-uninstall")
    assert role["metadata"]["annotations"]["helm.sh/hook-weight"] == "-10"
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["rel-gazette-c-broker"],
         "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    pod = job["spec"]["template"]["spec"]
    env = env_of(pod["containers"][0])
    broker = find(docs, "Deployment", "-broker")
    assert env["DEPLOYMENT"] == broker["metadata"]["name"]
    assert dict(kv.split("=") for kv in env["SELECTOR"].split(",")) == broker["spec"]["selector"]["matchLabels"]
    assert pod["serviceAccountName"] == find(docs, "ServiceAccount", "-uninstall")["metadata"]["name"]
    assert job["spec"]["activeDeadlineSeconds"] > broker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    _, docs = render("uninstall.drainBrokers=false")
    assert not [d for d in docs if d["kind"] == "Job"]
    _, docs = render("operator.enabled=false")
    assert not [d for d in docs if d["kind"] == "Job"]


def test_zone_from_pod_label():
    _, docs = render("broker.zoneFromPodLabel=true")
    env = env_of(find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]["containers"][0])
    assert env["BROKER_ZONE"] == {"fieldRef": {"fieldPath": "metadata.labels['topology.kubernetes.io/zone']"}}
    _, docs = render("broker.zone=us-east-1a")
    env = env_of(find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]["containers"][0])
    assert env["BROKER_ZONE"] == "us-east-1a"


def test_operator_deployment_elects_and_drains_the_chart_brokers():
    _, docs = render()
    dep = find(docs, "Deployment", "-operator")
    assert dep["spec"]["replicas"] == 2
    c = dep["spec"]["template"]["spec"]["containers"][0]
    env = env_of(c)
    assert env["OPERATOR_LEADER_ELECT"] == "true"
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # The drain selector selects exactly the broker Deployment's pods; the
    # PDB the operator keeps is the chart's only one.
    sts = find(docs, "Deployment", "-broker")
    labels = sts["spec"]["selector"]["matchLabels"]
    assert dict(kv.split("=") for kv in env["BROKERS_SELECTOR"].split(",")) == labels
    assert all(sts["spec"]["template"]["metadata"]["labels"][k] == v for k, v in labels.items())
    assert env["BROKERS_PDB"] == "rel-gazette-c-broker"
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert env["BROKER_ADDRESS"] == "http://rel-gazette-c-broker.gazette.svc:8080"
    # Followers are healthy but not "ready" at /readyz: probes use /healthz
    # so a rollout of two replicas does not stall on the standby.
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    help_text = subprocess.run([OPERATOR, "--help"], capture_output=True, text=True).stdout
    for name in env:
        assert "[$%s]" % name in help_text, name


def test_static_pdb_without_the_operator():
    _, docs = render("operator.enabled=false")
    pdb = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == \
        find(docs, "Deployment", "-broker")["spec"]["selector"]["matchLabels"]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"] == ["rel-gazette-c-broker"]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding", "ServiceAccount")]


def test_chart_rbac_is_the_standalone_manifest():
    _, docs = render()
    role = find(docs, "Role", "-operator")
    standalone = [d for d in yaml.safe_load_all(open(RBAC)) if d and d["kind"] == "Role"][0]
    assert role["rules"] == standalone["rules"]
    binding = find(docs, "RoleBinding", "-operator")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rel-gazette-c-operator",
                                    "namespace": "gazette"}]


@pytest.fixture
def ns(kube):
    n = "deploy-" + uuid.uuid4().hex[:8]
    kube.kubectl("create", "namespace", n)
    kube.kubectl("apply", "-f", CRDS)
    kube.kubectl("wait", "--for=condition=Established", "crd/journalspecs.gazette-c.dev", "--timeout=60s")
    return n


@pytest.mark.parametrize("sets", [(), ("operator.enabled=false",), ("broker.zoneFromPodLabel=true",
                                                                     "broker.replicas=5"),
                                  ("etcd.deploy.enabled=true",), SECURE],
                         ids=["defaults", "no-operator", "zones", "etcd", "secure"])
def test_rendered_chart_passes_a_server_side_dry_run(kube, ns, sets):
    text, docs = render(*sets, namespace=ns, include_crds=True)
    r = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=ns)
    kinds = {d["kind"] for d in docs}
    want = {"CustomResourceDefinition", "Deployment", "Service"}
    want |= {"PodDisruptionBudget"} if "operator.enabled=false" in sets else \
        {"Role", "RoleBinding", "ServiceAccount"}
    want |= {"StatefulSet", "PodDisruptionBudget"} if "etcd.deploy.enabled=true" in sets else set()
    want |= {"NetworkPolicy"} if "networkPolicy.enabled=true" in sets else set()
    assert want <= kinds, kinds
    assert r.stdout.count("(server dry run)") == len(docs), r.stdout
    # Nothing was stored.
    assert "No resources found" in kube.kubectl("get", "deployments", namespace=ns).stderr


def test_e2e_manifests_pass_a_server_side_dry_run(kube, ns):
    text, _ = render(namespace=ns, values=os.path.join(ROOT, "e2e/values-kind.yaml"))
    kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=ns)
    # The secure layer run-kind.sh adds: the keys' Secret reaches brokers
    # and operator.
    text, docs = render(namespace=ns, values=[os.path.join(ROOT, "e2e/values-kind.yaml"),
                                              os.path.join(ROOT, "e2e/values-kind-secure.yaml")])
    kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=ns)
    for name in ("-broker", "-operator"):
        env = env_of(find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0])
        assert env["BROKER_AUTH_KEYS"] == {"secretKeyRef": {"name": "gazette-keys", "key": "auth-keys"}}, name
    scripts = open(os.path.join(ROOT, "e2e/run-kind.sh")).read() + open(os.path.join(ROOT, "e2e/scenarios.sh")).read()
    assert "AUTH_SECRET=gazette-keys" in scripts and "values-kind-secure.yaml" in scripts
    r = kube.kubectl("apply", "--dry-run=server", "-f", os.path.join(ROOT, "e2e/journals.yaml"), namespace=ns)
    assert r.stdout.count("(server dry run)") == 3, r.stdout
    for m in ("seaweedfs.yaml", "minio.yaml"):
        body = open(os.path.join(ROOT, "e2e/manifests", m)).read()
        body = body.replace("${MINIO_IMAGE}", "minio:pinned")
        kube.kubectl("apply", "--dry-run=server", "-f", "-", input=body, namespace=ns)


def test_monitoring_matches_the_broker_service_and_operator_pods():
    _, docs = render(*MONITORING)
    sm, pm = find(docs, "ServiceMonitor"), find(docs, "PodMonitor")
    svc = find(docs, "Service", "-broker")
    assert all(svc["metadata"]["labels"][k] == v for k, v in sm["spec"]["selector"]["matchLabels"].items())
    assert sm["spec"]["endpoints"][0]["port"] in [p["name"] for p in svc["spec"]["ports"]]
    assert sm["spec"]["endpoints"][0]["path"] == "/debug/metrics"
    op = find(docs, "Deployment", "-operator")["spec"]["template"]
    assert all(op["metadata"]["labels"][k] == v for k, v in pm["spec"]["selector"]["matchLabels"].items())
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] in [p["name"] for p in op["spec"]["containers"][0]["ports"]]
    cm = find(docs, "ConfigMap", "-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dash = json.loads(cm["data"]["gazette-c.json"])
    assert dash["uid"] == "gazette-c" and len(dash["panels"]) >= 10
    # Off by default.
    _, docs = render()
    assert not [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor", "ConfigMap")]
    _, docs = render(*MONITORING, "operator.enabled=false")
    assert not [d for d in docs if d["kind"] == "PodMonitor"]


def test_dashboard_queries_only_metrics_the_programs_export(cluster):
    """Every metric the dashboard queries is exported: the brokers' by a
    running broker's /debug/metrics, the operator's by its binary."""
    dash = json.load(open(os.path.join(CHART, "dashboards/gazette-c.json")))
    names = set()
    for p in dash["panels"]:
        for t in p["targets"]:
            names |= {re.sub(r"_bucket$", "", n) for n in re.findall(r"\bgazette_[a-z_]+", t["expr"])}
    assert len(names) >= 15, names
    b = cluster.start()
    # Labelled families appear once used: append, persist and read back.
    c = Client(b.address)
    c.apply(spec("dash/j", length=1024))
    wait_assigned(c, "dash/j")
    for _ in range(3):
        assert c.append("dash/j", b"x" * 1500).status == pb.OK
    wait_for(lambda: len(list(c.fragments("dash/j").fragments)) >= 2, 20, "persisted fragments")
    c.read_bytes("dash/j")
    body = urllib.request.urlopen(b.address + "/debug/metrics", timeout=10).read().decode()
    exported = set(re.findall(r"^# TYPE (\S+)", body, re.M))
    operator_bin = open(OPERATOR, "rb").read()
    for n in sorted(names):
        if n.startswith("gazette_operator_"):
            assert b"\0" + n.encode() + b"\0" in operator_bin, n
        else:
            assert n in exported, (n, sorted(exported))


@pytest.fixture
def monitoring_crds(kube):
    for f in sorted(os.listdir(MONITORING_CRDS)):
        kube.kubectl("apply", "--server-side", "-f", os.path.join(MONITORING_CRDS, f))
    kube.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com",
                 "crd/podmonitors.monitoring.coreos.com", "--timeout=60s")


def test_monitoring_passes_a_server_side_dry_run(kube, ns, monitoring_crds):
    """The ServiceMonitor and PodMonitor are valid under the Prometheus
    Operator's own CRD schemas (v0.85.0), checked by the API server."""
    text, docs = render(*MONITORING, namespace=ns)
    r = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=ns)
    assert r.stdout.count("(server dry run)") == len(docs), r.stdout
    assert "servicemonitor.monitoring.coreos.com/rel-gazette-c-broker created (server dry run)" in r.stdout
    # A mistake is caught by the same schema: an endpoint without a port.
    bad = text.replace("    - port: http\n      path: /debug/metrics", "    - portz: http\n      path: /debug/metrics")
    assert bad != text
    r = kube.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=bad, namespace=ns,
                     check=False)
    assert r.returncode != 0 and "portz" in r.stderr, r.stderr


def test_env_source_changes_roll_the_pods(kube, ns):
    """The broker pods' checksum/env-sources annotation follows the content
    of the Secrets and ConfigMaps they take environment from, as the
    cluster holds them at install or upgrade (helm's lookup), so a changed
    Secret rolls the brokers at the next helm upgrade; the same content
    does not."""
    def checksum(*sets):
        args = ["template", "rel", CHART, "--namespace", ns, "--kube-version", KUBE_VERSION,
                "--kubeconfig", kube.kubeconfig, "--dry-run=server",
                "--set", "broker.envFrom[0].secretRef.name=s3",
                "--set", "broker.extraEnv[0].name=REGION",
                "--set", "broker.extraEnv[0].valueFrom.configMapKeyRef.name=cfg",
                "--set", "broker.extraEnv[0].valueFrom.configMapKeyRef.key=region"]
        docs = [d for d in yaml.safe_load_all(helm(*args).stdout) if d]
        return find(docs, "Deployment", "-broker")["spec"]["template"]["metadata"]["annotations"][
            "checksum/env-sources"]

    def put(kind, name, *literals):
        body = kube.kubectl("create", kind, *( ["generic"] if kind == "secret" else []), name,
                            *["--from-literal=" + x for x in literals], "--dry-run=client", "-o", "yaml").stdout
        kube.kubectl("apply", "-f", "-", input=body, namespace=ns)
    put("secret", "s3", "AWS_ACCESS_KEY_ID=a")
    put("configmap", "cfg", "region=us-east-1", "other=1")
    first = checksum()
    assert checksum() == first
    put("secret", "s3", "AWS_ACCESS_KEY_ID=b")
    second = checksum()
    assert second != first
    put("configmap", "cfg", "region=us-east-1", "other=2")  # a key the brokers do not read
    assert checksum() == second
    put("configmap", "cfg", "region=eu-west-1", "other=2")
    assert checksum() != second


def standalone_schemas(openapi, out_dir):
    """Writes one strict, self-contained JSON schema per kind the API server
    serves (its /openapi/v2, CRDs included) as <group>-<version>-<kind>.json,
    the layout of kubeconform's -schema-location template below. $refs are
    inlined (a recursive one accepts anything); objects with properties
    reject unknown fields unless Kubernetes preserves them; IntOrString
    takes both."""
    defs = openapi["definitions"]

    def resolve(node, stack):
        if isinstance(node, list):
            return [resolve(n, stack) for n in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            name = node["$ref"].rsplit("/", 1)[1]
            return {} if name in stack else resolve(defs[name], stack + (name,))
        if node.get("format") == "int-or-string":
            return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        out = {k: resolve(v, stack) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out and \
                not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    n = 0
    for name, d in defs.items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            group = gvk["group"] or gvk["version"]
            path = os.path.join(out_dir, ("%s-%s-%s.json" % (group, gvk["version"], gvk["kind"])).lower())
            with open(path, "w") as f:
                json.dump(resolve(d, (name,)), f)
            n += 1
    return n


def test_kubeconform_passes_every_value_set(kube, monitoring_crds, tmp_path):
    """kubeconform -strict over what the chart renders for each golden value
    set, against schemas from the suite's kube-apiserver with the CRDs
    installed (no schema registry is reachable here), CRDs and
    monitoring kinds included; a misspelt field fails it."""
    kube.kubectl("apply", "-f", CRDS)
    kube.kubectl("wait", "--for=condition=Established", "crd/journalspecs.gazette-c.dev", "--timeout=60s")

    def published():
        spec = json.loads(kube.kubectl("get", "--raw", "/openapi/v2").stdout)
        kinds = {g["kind"] for d in spec["definitions"].values() for g in d.get("x-kubernetes-group-version-kind", [])}
        return spec if {"ServiceMonitor", "PodMonitor", "JournalSpec", "Deployment"} <= kinds else None
    spec = wait_for(published, 30, "CRD schemas in /openapi/v2")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    assert standalone_schemas(spec, str(schemas)) > 100
    location = str(schemas) + "/{{ .Group }}-{{ .ResourceAPIVersion }}-{{ .ResourceKind }}.json"

    def conform(text):
        return subprocess.run([KUBECONFORM, "-strict", "-summary", "-schema-location", location, "-"],
                              input=text, capture_output=True, text=True, timeout=120)
    for name, sets in sorted(GOLDEN_SETS.items()):
        text, docs = render(*sets, include_crds=True)
        r = conform(text)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        assert "Valid: %d, Invalid: 0, Errors: 0, Skipped: 0" % len(docs) in r.stdout, (name, r.stdout)
    text, _ = render()
    bad = text.replace("      maxUnavailable: 0\n", "      maxUnavailble: 0\n", 1)
    assert bad != text
    r = conform(bad)
    assert r.returncode != 0 and "maxUnavailble" in r.stdout, r.stdout


def apply_rbac(kube, ns):
    text = open(RBAC).read().replace("namespace: gazette\n", "namespace: %s\n" % ns)
    kube.kubectl("apply", "-f", "-", input=text, namespace=ns)


ALLOWED = [("get", "journalspecs.gazette-c.dev"), ("list", "journalspecs.gazette-c.dev"),
           ("watch", "journalspecs.gazette-c.dev"), ("patch", "journalspecs.gazette-c.dev"),
           ("patch", "journalspecs.gazette-c.dev", "status"), ("list", "shardspecs.gazette-c.dev"),
           ("create", "events"), ("get", "leases.coordination.k8s.io"),
           ("create", "leases.coordination.k8s.io"), ("update", "leases.coordination.k8s.io"),
           ("list", "pods"), ("watch", "pods"), ("patch", "pods"),
           ("get", "poddisruptionbudgets.policy"), ("create", "poddisruptionbudgets.policy"),
           ("patch", "poddisruptionbudgets.policy")]
DENIED = [("delete", "pods"), ("update", "pods"), ("create", "pods"), ("get", "secrets"),
          ("list", "configmaps"), ("delete", "journalspecs.gazette-c.dev"),
          ("create", "journalspecs.gazette-c.dev"), ("update", "journalspecs.gazette-c.dev", "status"),
          ("delete", "poddisruptionbudgets.policy"), ("delete", "leases.coordination.k8s.io"),
          ("patch", "pods", "eviction"), ("create", "pods", "eviction"), ("patch", "pods", "status")]


def test_rbac_grants_exactly_what_the_operator_calls(kube, ns):
    apply_rbac(kube, ns)
    who = "system:serviceaccount:%s:gazette-operator" % ns

    def can(verb, resource, sub=None, namespace=ns):
        args = ["auth", "can-i", verb, resource, "--as", who, "-n", namespace]
        if sub:
            args += ["--subresource", sub]
        return kube.kubectl(*args, check=False).stdout.strip() == "yes"
    for a in ALLOWED:
        assert can(*a), a
    for d in DENIED:
        assert not can(*d), d
    # Nothing outside its namespace, nothing cluster-scoped.
    assert not can("list", "pods", namespace="default")
    assert not can("list", "nodes")
    assert not can("list", "customresourcedefinitions.apiextensions.k8s.io")


def test_operator_runs_under_the_rbac_manifest(kube, ns, cluster, tmp_path):
    """The grants are sufficient: gazette-operator in-cluster mode with a
    token of the manifest's ServiceAccount syncs a JournalSpec, elects
    itself, puts its finalizer on a broker pod and keeps the PDB."""
    apply_rbac(kube, ns)
    sa = tmp_path / "sa"
    sa.mkdir()
    ca = kube.kubectl("config", "view", "--raw", "-o",
                      "jsonpath={.clusters[0].cluster.certificate-authority-data}").stdout
    (sa / "ca.crt").write_bytes(base64.b64decode(ca))
    (sa / "namespace").write_text(ns + "\n")
    (sa / "token").write_text(kube.kubectl("create", "token", "gazette-operator", "--duration", "10m",
                                           namespace=ns).stdout)
    server = kube.kubectl("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    host, port = server.replace("https://", "").rsplit(":", 1)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "broker-0", "labels": {"app.kubernetes.io/component": "broker"}},
           "spec": {"containers": [{"name": "broker", "image": "gazette-c:test"}]}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(pod), namespace=ns)
    b = cluster.start(bid="broker-0")
    op = Operator(kube, cluster, ns, b.address, in_cluster=True,
                  extra=["--kube.service-account-dir", str(sa), "--leader-elect",
                         "--brokers.selector", "app.kubernetes.io/component=broker",
                         "--brokers.pdb", "brokers", "--drain.interval", "1s"],
                  env={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port})
    try:
        op.start()
        doc = {"apiVersion": "gazette-c.dev/v1alpha1", "kind": "JournalSpec", "metadata": {"name": "rbac"},
               "spec": {"name": "deploy/rbac", "replication": 1,
                        "fragment": {"stores": ["file:///"], "refreshInterval": "1s"}}}
        kube.kubectl("apply", "-f", "-", input=json.dumps(doc), namespace=ns)

        def ready():
            st = json.loads(kube.kubectl("get", "journalspec", "rbac", "-o", "json", namespace=ns).stdout)
            return any(c["type"] == "Ready" and c["status"] == "True"
                       for c in (st.get("status") or {}).get("conditions", []))
        wait_for(ready, 30, "JournalSpec Ready under the manifest's grants")

        def pod_finalized():
            p = json.loads(kube.kubectl("get", "pod", "broker-0", "-o", "json", namespace=ns).stdout)
            return "gazette-c.dev/drain" in (p["metadata"].get("finalizers") or [])
        wait_for(pod_finalized, 30, "drain finalizer on the broker pod")

        def pdb():
            r = kube.kubectl("get", "pdb", "brokers", "-o", "json", namespace=ns, check=False)
            return r.returncode == 0 and json.loads(r.stdout)["spec"]["maxUnavailable"] == 1
        wait_for(pdb, 30, "PDB kept under the manifest's grants")
        lease = json.loads(kube.kubectl("get", "lease", "gazette-operator", "-o", "json", namespace=ns).stdout)
        assert lease["spec"]["holderIdentity"]
        log = op.logtext()
        # (The API server's 403 answers say "forbidden"; timestamps may hold "403".)
        assert "forbidden" not in log.lower(), op.logtail()
    finally:
        op.stop()
        kube.kubectl("patch", "pod", "broker-0", "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                     namespace=ns, check=False)


@pytest.mark.parametrize("bad,message", [
    ("broker.replicsa=3", "additional properties 'replicsa' not allowed"),
    ("etcd.prefix=/gazette/", "/etcd/prefix"),
    ("broker.logLevel=verbose", "/broker/logLevel"),
    ("operator.drains.interval=5", "/operator/drains/interval"),
    ("tls.enabled=true", "/tls/existingSecret"),
    ("auth.existingSecretKey=", "/auth/existingSecretKey"),
    ("networkPolicy.clientSelector.podSelectr.matchLabels.a=b", "additional properties 'podSelectr' not allowed"),
    ("networkPolicy.enabled=yes", "/networkPolicy/enabled"),
    ("networkPolicy.clientSelector.podSelector.matchLabels.client=true",
     "/networkPolicy/clientSelector/podSelector/matchLabels/client"),
])
def test_values_schema_rejects_mistakes(bad, message):
    r = helm("template", "rel", CHART, "--kube-version", KUBE_VERSION, "--set", bad, check=False)
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_image_build_stage_has_every_source_it_compiles(tmp_path):
    """The Dockerfile's build stage copies named directories, not the tree:
    a directory a program starts to include (gazctl's message layer) must be
    copied too. This builds the stage's make targets from exactly what its
    COPY lines copy, in seconds and without Docker, so a missing directory
    fails here rather than in the image build at the end of CI."""
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    build_stage = text.split("\nFROM ", 2)[1]
    copies = re.findall(r"^COPY (\S+) (\S+)\s*$", build_stage, re.M)
    assert copies, "no COPY lines in the build stage"
    for src, dst in copies:
        dst = os.path.join(tmp_path, src if dst == "./" else dst)
        path = os.path.join(ROOT, src)
        if os.path.isdir(path):
            subprocess.check_call(["cp", "-r", path, dst])
        else:
            subprocess.check_call(["cp", path, dst])
    run = re.search(r"^RUN make (?:-j\S+ )?(.+?)\s*\\?$", build_stage, re.M)
    assert run, "no make line in the build stage"
    targets = run.group(1).split()
    r = subprocess.run(["make", "-j%d" % max(1, os.cpu_count() // 2)] + targets, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "the image's build stage fails on its own sources:\n" + r.stdout[-2000:] + r.stderr[-4000:]
    for t in targets:
        assert os.access(os.path.join(tmp_path, t), os.X_OK), t


# ---- security: authorization keys, TLS, Pod Security, NetworkPolicies ----------------

def pods_of(docs):
    """(kind/name, pod template) of every workload rendered."""
    out = []
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "Job"):
            tpl = json.loads(json.dumps(d["spec"]["template"]))
            # A StatefulSet's pods get their claims as volumes.
            for claim in d["spec"].get("volumeClaimTemplates", []):
                n = claim["metadata"]["name"]
                tpl["spec"].setdefault("volumes", []).append(
                    {"name": n, "persistentVolumeClaim": {"claimName": "%s-%s-0" % (n, d["metadata"]["name"])}})
            out.append(("%s/%s" % (d["kind"], d["metadata"]["name"]), tpl))
    return out


def test_auth_keys_come_from_the_secret_for_brokers_and_operator():
    _, docs = render()
    for name in ("-broker", "-operator"):
        env = env_of(find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0])
        assert "BROKER_AUTH_KEYS" not in env and "BROKER_AUTH_TOKEN" not in env, name
    _, docs = render("auth.existingSecret=gazette-keys")
    for name in ("-broker", "-operator"):
        env = env_of(find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0])
        assert env["BROKER_AUTH_KEYS"] == {"secretKeyRef": {"name": "gazette-keys", "key": "auth-keys"}}, name
    _, docs = render("auth.existingSecret=k", "auth.existingSecretKey=keys.txt")
    env = env_of(find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]["containers"][0])
    assert env["BROKER_AUTH_KEYS"] == {"secretKeyRef": {"name": "k", "key": "keys.txt"}}
    # The uninstall hook makes no broker call: it needs no keys.
    job = find(docs, "Job", "-uninstall")["spec"]["template"]["spec"]["containers"][0]
    assert "BROKER_AUTH_KEYS" not in env_of(job) and "gazctl" not in json.dumps(job)
    # Both programs take the variable as their --broker.auth-keys.
    for prog in ([GAZETTE, "serve", "--help"], [OPERATOR, "--help"]):
        out = subprocess.run(prog, capture_output=True, text=True).stdout
        assert re.search(r"--broker\.auth-keys=.*\[\$BROKER_AUTH_KEYS\]", out), prog


def test_auth_secret_changes_roll_brokers_and_operator(kube, ns):
    """The keys' Secret enters the pods' checksum/env-sources annotation
    through helm's lookup: new keys roll brokers and operator at the next
    helm upgrade; other keys of the Secret do not."""
    def checksums():
        args = ["template", "rel", CHART, "--namespace", ns, "--kube-version", KUBE_VERSION,
                "--kubeconfig", kube.kubeconfig, "--dry-run=server", "--set", "auth.existingSecret=keys"]
        docs = [d for d in yaml.safe_load_all(helm(*args).stdout) if d]
        return [find(docs, "Deployment", n)["spec"]["template"]["metadata"]["annotations"]["checksum/env-sources"]
                for n in ("-broker", "-operator")]

    def put(*literals):
        body = kube.kubectl("create", "secret", "generic", "keys", *["--from-literal=" + x for x in literals],
                            "--dry-run=client", "-o", "yaml").stdout
        kube.kubectl("apply", "-f", "-", input=body, namespace=ns)
    put("auth-keys=a2V5MQ==", "note=1")
    first = checksums()
    assert checksums() == first
    put("auth-keys=a2V5MQ==", "note=2")
    assert checksums() == first
    put("auth-keys=a2V5Mg==,a2V5MQ==", "note=2")
    second = checksums()
    assert second[0] != first[0] and second[1] != first[1], (first, second)


TLS_BROKER_ENV = {"BROKER_SERVER_CERT_FILE": "/etc/gazette/tls/tls.crt",
                  "BROKER_SERVER_CERT_KEY_FILE": "/etc/gazette/tls/tls.key",
                  "BROKER_PEER_CERT_FILE": "/etc/gazette/tls/tls.crt",
                  "BROKER_PEER_CERT_KEY_FILE": "/etc/gazette/tls/tls.key",
                  "BROKER_PEER_CA_FILE": "/etc/gazette/tls/ca.crt"}


@pytest.mark.parametrize("client_certs", [False, True])
def test_tls_mounts_the_secret_and_switches_to_https(client_certs):
    sets = ("tls.enabled=true", "tls.existingSecret=certs") + (("tls.requireClientCerts=true",) if client_certs else ())
    _, docs = render(*(sets + MONITORING))
    broker = find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]
    c = broker["containers"][0]
    env = env_of(c)
    want = dict(TLS_BROKER_ENV, **({"BROKER_SERVER_CA_FILE": "/etc/gazette/tls/ca.crt"} if client_certs else {}))
    assert {k: v for k, v in env.items() if "CERT" in k or "CA_FILE" in k} == want
    # A projected Secret volume, mounted read-only as a directory (a subPath
    # mount would never see a renewed certificate).
    vols = {v["name"]: v for v in broker["volumes"]}
    assert vols["tls"]["projected"]["sources"] == [
        {"secret": {"name": "certs", "items": [{"key": k, "path": k} for k in ("tls.crt", "tls.key", "ca.crt")]}}]
    assert {"name": "tls", "mountPath": "/etc/gazette/tls", "readOnly": True} in c["volumeMounts"]
    assert not [m for m in c["volumeMounts"] if "subPath" in m]
    assert c["ports"] == [{"name": "https", "containerPort": 8080}]
    for probe in ("startupProbe", "readinessProbe"):
        if client_certs:  # the kubelet has no client certificate: curl in the pod has
            cmd = c[probe]["exec"]["command"]
            assert cmd[0] == "curl" and "https://127.0.0.1:8080/debug/ready" in cmd, cmd
            assert cmd[cmd.index("--cert") + 1] == "/etc/gazette/tls/tls.crt"
        else:
            assert c[probe]["httpGet"] == {"path": "/debug/ready", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["tcpSocket"] == {"port": "https"}
    svc = find(docs, "Service", "-broker")
    assert svc["spec"]["ports"] == [{"name": "https", "port": 8080, "targetPort": "https"}]
    # The operator dials https:// and verifies against the CA (and
    # presents the certificate when the brokers require one).
    op = find(docs, "Deployment", "-operator")["spec"]["template"]["spec"]
    oenv = env_of(op["containers"][0])
    assert oenv["BROKER_ADDRESS"] == "https://rel-gazette-c-broker.gazette.svc:8080"
    assert oenv["BROKER_TRUSTED_CA_FILE"] == "/etc/gazette/tls/ca.crt"
    assert ("BROKER_CERT_FILE" in oenv) == client_certs and ("BROKER_CERT_KEY_FILE" in oenv) == client_certs
    assert {"name": "tls", "mountPath": "/etc/gazette/tls", "readOnly": True} in op["containers"][0]["volumeMounts"]
    assert op["securityContext"]["fsGroup"] == 65532  # the files are 0440
    sm = find(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert sm["port"] == "https" and sm["scheme"] == "https"
    assert sm["tlsConfig"]["ca"] == {"secret": {"name": "certs", "key": "ca.crt"}}
    assert ("cert" in sm["tlsConfig"]) == client_certs
    # Off by default: no TLS variable, volume or https anywhere.
    text, _ = render(*MONITORING)
    assert "https" not in text.replace("https://kubernetes.default.svc", "") and "CERT_FILE" not in text


@pytest.mark.parametrize("sets,host", [
    ((), None),
    (("tls.enabled=true", "tls.existingSecret=certs"), "10-244-1-5.gazette.pod.cluster.local"),
    (("tls.enabled=true", "tls.existingSecret=certs", "broker.advertise=podIP"), None),
    (("broker.advertise=podDNS", "clusterDomain=k8s.example"), "10-244-1-5.gazette.pod.k8s.example"),
], ids=["plain", "tls", "tls-podIP", "podDNS"])
def test_brokers_advertise_a_name_their_certificate_can_hold(sets, host, tmp_path):
    """broker.advertise: pod IPs, or (the default under TLS) the pod's DNS
    name <ip-with-dashes>.<namespace>.pod.<clusterDomain>, which one
    wildcard certificate covers. The rendered command is run by /bin/sh
    as the pod would, with a stand-in gazette that prints its arguments:
    extraArgs still reach it."""
    _, docs = render(*(sets + ("broker.extraArgs={--log.level,debug}",)))
    c = find(docs, "Deployment", "-broker")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(c)["BROKER_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    if host is None:
        assert c["command"] == ["gazette", "serve"]
        return
    fake = tmp_path / "gazette"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    env = {"PATH": "%s:/usr/bin:/bin" % tmp_path, "BROKER_HOST": "10.244.1.5"}
    out = subprocess.run(c["command"] + c["args"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:-1] == ["serve", "--broker.host", host, "--log.level", "debug"]
    env["BROKER_HOST"] = "fd00:10:244::5"  # IPv6: colons become dashes too
    out = subprocess.run(c["command"] + c["args"], capture_output=True, text=True, env=env)
    assert out.stdout.split("\n")[2] == host.replace("10-244-1-5", "fd00-10-244--5")


def test_tls_variables_are_flags_of_their_programs():
    """Every variable the chart sets under TLS is a flag its program reads."""
    _, docs = render("tls.enabled=true", "tls.existingSecret=certs", "tls.requireClientCerts=true",
                     "etcd.tls.existingSecret=etcd-certs")
    for name, prog in (("-broker", [GAZETTE, "serve", "--help"]), ("-operator", [OPERATOR, "--help"])):
        env = env_of(find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0])
        help_text = subprocess.run(prog, capture_output=True, text=True).stdout
        for var in env:
            if var != "TMPDIR":
                assert "[$%s]" % var in help_text, (name, var)


RESTRICTED_SETS = {"defaults": (), "etcd": ("etcd.deploy.enabled=true",), "secure": SECURE}


def test_every_container_is_locked_down():
    """What Pod Security's restricted level does not check but we want:
    a read-only root filesystem everywhere, the image's non-root user,
    no service-account token where nothing calls the API."""
    for name, sets in RESTRICTED_SETS.items():
        _, docs = render(*sets)
        pods = pods_of(docs)
        assert len(pods) == (3 if "etcd.deploy.enabled=true" in sets else 2) + 1, [p[0] for p in pods]
        for what, tpl in pods:
            spec = tpl["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True, what
            assert spec["securityContext"]["runAsUser"] == 65532 == spec["securityContext"]["runAsGroup"], what
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, what
            for c in spec["containers"] + spec.get("initContainers", []):
                sc = c["securityContext"]
                assert sc["readOnlyRootFilesystem"] is True, (what, c["name"])
                assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}, what
            if "operator" not in what and "uninstall" not in what:
                assert spec["automountServiceAccountToken"] is False, what


@pytest.fixture
def restricted_ns(kube, ns):
    kube.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
                 "pod-security.kubernetes.io/enforce-version=latest", "pod-security.kubernetes.io/warn=restricted")
    return ns


def dry_run_pods(kube, ns, docs):
    """Each pod template as a Pod, server-side dry run: Pod Security
    enforces on Pods (on workloads it only warns)."""
    results = []
    for what, tpl in pods_of(docs):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": what.split("/")[1], "labels": tpl["metadata"].get("labels", {})},
               "spec": tpl["spec"]}
        r = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod), namespace=ns, check=False)
        results.append((what, r))
    return results


@pytest.mark.parametrize("name", sorted(RESTRICTED_SETS))
def test_chart_passes_pod_security_restricted(kube, restricted_ns, name):
    """Everything the chart renders, into a namespace enforcing the
    restricted Pod Security Standard on the real API server: workloads
    without a warning, each pod template admitted as a Pod."""
    text, docs = render(*RESTRICTED_SETS[name], namespace=restricted_ns, include_crds=True)
    r = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=restricted_ns)
    assert "PodSecurity" not in r.stderr, r.stderr
    assert r.stdout.count("(server dry run)") == len(docs), r.stdout
    for what, r in dry_run_pods(kube, restricted_ns, docs):
        assert r.returncode == 0, (what, r.stderr)


@pytest.mark.parametrize("removed,sets,violation", [
    ("broker.securityContext.allowPrivilegeEscalation=null", (), "allowPrivilegeEscalation != false"),
    ("broker.securityContext.capabilities=null", (), "unrestricted capabilities"),
    ("broker.podSecurityContext.seccompProfile=null", (), "seccompProfile"),
    ("broker.podSecurityContext.runAsNonRoot=null", (), "runAsNonRoot != true"),
    ("operator.securityContext.capabilities.drop=null", (), "unrestricted capabilities"),
    ("operator.podSecurityContext.runAsNonRoot=null", (), "runAsNonRoot != true"),
    ("etcd.deploy.securityContext.allowPrivilegeEscalation=null", ("etcd.deploy.enabled=true",),
     "allowPrivilegeEscalation != false"),
    ("etcd.deploy.podSecurityContext.seccompProfile=null", ("etcd.deploy.enabled=true",), "seccompProfile"),
])
def test_pod_security_catches_a_removed_field(kube, restricted_ns, removed, sets, violation):
    """The restricted check can fail: one field less and the API server
    refuses the pod (and warns about its workload)."""
    text, docs = render(removed, *sets, namespace=restricted_ns)
    r = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=text, namespace=restricted_ns)
    assert 'would violate PodSecurity "restricted:latest"' in r.stderr and violation in r.stderr, r.stderr
    refused = [(what, r.stderr) for what, r in dry_run_pods(kube, restricted_ns, docs) if r.returncode]
    assert refused and all('violates PodSecurity "restricted:latest"' in e and violation in e
                           for _, e in refused), refused


def test_network_policies_admit_the_release_and_its_clients():
    _, docs = render()
    assert not [d for d in docs if d["kind"] == "NetworkPolicy"]
    _, docs = render(*SECURE)
    broker = find(docs, "Deployment", "-broker")["spec"]["template"]["metadata"]["labels"]
    operator = find(docs, "Deployment", "-operator")["spec"]["template"]["metadata"]["labels"]
    etcd = find(docs, "StatefulSet", "-etcd")["spec"]["template"]["metadata"]["labels"]

    def selects(sel, labels):
        return all(labels.get(k) == v for k, v in sel["matchLabels"].items())
    bp = find(docs, "NetworkPolicy", "-broker")["spec"]
    assert bp["policyTypes"] == ["Ingress"] and selects(bp["podSelector"], broker)
    assert not selects(bp["podSelector"], operator) and not selects(bp["podSelector"], etcd)
    [rule] = bp["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]
    peers = rule["from"]
    assert selects(peers[0]["podSelector"], broker) and selects(peers[1]["podSelector"], operator)
    assert peers[2] == {"podSelector": {"matchLabels": {"gazette-client": "broker-client"}},
                        "namespaceSelector": {"matchLabels": {"team": "data"}}}
    assert len(peers) == 3
    ep = find(docs, "NetworkPolicy", "-etcd")["spec"]
    assert selects(ep["podSelector"], etcd) and not selects(ep["podSelector"], broker)
    clients, peer_rule = ep["ingress"]
    assert clients["ports"] == [{"protocol": "TCP", "port": 2379}]
    assert [p for p in clients["from"] if selects(p["podSelector"], broker)] and \
        [p for p in clients["from"] if selects(p["podSelector"], operator)]
    assert peer_rule["ports"] == [{"protocol": "TCP", "port": 2380}]
    assert len(peer_rule["from"]) == 1 and selects(peer_rule["from"][0]["podSelector"], etcd)
    assert not selects(peer_rule["from"][0]["podSelector"], broker)
    # extraFrom adds peers (e.g. Prometheus); no etcd policy without etcd.
    _, docs = render("networkPolicy.enabled=true", "networkPolicy.extraFrom[0].namespaceSelector.matchLabels.m=mon")
    peers = find(docs, "NetworkPolicy", "-broker")["spec"]["ingress"][0]["from"]
    assert peers[-1] == {"namespaceSelector": {"matchLabels": {"m": "mon"}}} and len(peers) == 3
    assert len([d for d in docs if d["kind"] == "NetworkPolicy"]) == 1
