#!/usr/bin/env bash
# deps.sh - installs everything gazette-c builds and tests with; idempotent.
#
#   scripts/deps.sh            install what is missing (Debian packages as
#                              root; Gazette's Go binaries into the cache)
#   scripts/deps.sh --check    only report what is missing (exit 1 if any)
#   scripts/deps.sh --gazette-dir   print the directory of Gazette's binaries
#
# Gazette's own `gazette` and `gazctl` (module go.gazette.dev/core, pinned
# below) are built from the Go module proxy into a cache outside the
# checkout, so a fresh clone on the same machine reuses them:
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/gazette-<version>/{gazette,gazctl}
# and etcd 3.6 likewise (Gazette's etcd client needs >= 3.5; Debian has 3.4):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/etcd-<version>/{etcd,etcdctl}
# and helm, which renders and lints charts/gazette-c (`--helm-dir` prints
# where; `--build-helm` builds it):
#   ${GAZ_CACHE:-$HOME/.cache/gazette-c}/helm-<version>/helm
set -euo pipefail

GAZETTE_VERSION=v0.103.0
ETCD_VERSION=v3.6.14
# SeaweedFS has no semver tags; this pseudo-version is its 2026-11-09 commit.
WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
KUBE_VERSION=v1.35.4
HELM_VERSION=v3.21.4
CACHE=${GAZ_CACHE:-$HOME/.cache/gazette-c}
GAZETTE_DIR=$CACHE/gazette-$GAZETTE_VERSION
ETCD_DIR=$CACHE/etcd-$ETCD_VERSION
WEED_DIR=$CACHE/seaweedfs-$WEED_VERSION
KUBE_DIR=$CACHE/kubernetes-$KUBE_VERSION
HELM_DIR=$CACHE/helm-$HELM_VERSION

PKGS=(build-essential pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
      protobuf-compiler libprotobuf-dev etcd-server etcd-client libssl-dev libzstd-dev
      libcurl4-openssl-dev libjansson-dev libyaml-dev libexpat1-dev zlib1g-dev libsnappy-dev
      libcmocka-dev python3-grpcio python3-protobuf python3-yaml python3-boto3 python3-pytest curl
      wamerican-huge)

missing_pkgs() {
	local p
	for p in "${PKGS[@]}"; do
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

build_weed() {
	# SeaweedFS (Apache-2.0), the S3-compatible server of the suite. Its
	# go.mod has replace lines, so `go install` refuses it: build through a
	# throwaway module that copies those replace lines.
	command -v go >/dev/null || { echo "deps: go is needed to build SeaweedFS" >&2; return 1; }
	local tmp
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

case "${1:-}" in
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
--check)
	m=$(missing_pkgs)
	bad=0
	[ -z "$m" ] || { echo "deps: missing packages: $m (run: make deps)" >&2; bad=1; }
	[ -x "$GAZETTE_DIR/gazette" ] || { echo "deps: missing $GAZETTE_DIR/gazette (run: make deps)" >&2; bad=1; }
	[ -x "$ETCD_DIR/etcd" ] || { echo "deps: missing $ETCD_DIR/etcd (run: make deps)" >&2; bad=1; }
	[ -x "$WEED_DIR/weed" ] || { echo "deps: missing $WEED_DIR/weed (run: make deps)" >&2; bad=1; }
	[ -x "$KUBE_DIR/kube-apiserver" ] || { echo "deps: missing $KUBE_DIR/kube-apiserver (run: make deps)" >&2; bad=1; }
	[ -x "$HELM_DIR/helm" ] || { echo "deps: missing $HELM_DIR/helm (run: make deps)" >&2; bad=1; }
	exit $bad
	;;
esac

m=$(missing_pkgs)
if [ -n "$m" ]; then
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	echo "deps: installing $m" >&2
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $m >/dev/null
fi
if [ ! -x "$GAZETTE_DIR/gazette" ] || [ ! -x "$GAZETTE_DIR/gazctl" ]; then
	build_gazette
fi
if [ ! -x "$ETCD_DIR/etcd" ] || [ ! -x "$ETCD_DIR/etcdctl" ]; then
	build_etcd
fi
if [ ! -x "$WEED_DIR/weed" ]; then
	build_weed
fi
if [ ! -x "$KUBE_DIR/kube-apiserver" ] || [ ! -x "$KUBE_DIR/kubectl" ]; then
	build_kube
fi
if [ ! -x "$HELM_DIR/helm" ]; then
	build_helm
fi
