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
set -euo pipefail

GAZETTE_VERSION=v0.103.0
ETCD_VERSION=v3.6.14
CACHE=${GAZ_CACHE:-$HOME/.cache/gazette-c}
GAZETTE_DIR=$CACHE/gazette-$GAZETTE_VERSION
ETCD_DIR=$CACHE/etcd-$ETCD_VERSION

PKGS=(build-essential pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
      protobuf-compiler libprotobuf-dev etcd-server etcd-client libssl-dev libzstd-dev
      libcurl4-openssl-dev libjansson-dev libyaml-dev zlib1g-dev libsnappy-dev
      libcmocka-dev python3-grpcio python3-protobuf python3-yaml curl
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

case "${1:-}" in
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
