#!/usr/bin/env bash
# images.sh - builds, with no container registry, every image the kind e2e
# (e2e/run-kind.sh) uses, and the kind and kubectl it runs; idempotent.
#
#   scripts/images.sh              build what is missing, printing each
#                                  step's wall time; then write the e2e env
#   scripts/images.sh --print-env  print that env as shell exports, for
#                                  eval "$(scripts/images.sh --print-env)":
#                                  KIND_NODE_IMAGE, ETCD_IMAGE, MINIO_IMAGE,
#                                  MINIO_MANIFEST, EXTRA_IMAGES, ECHO_IMAGE,
#                                  PATH (kind, kubectl, helm first)
#   scripts/images.sh --docker     only make sure a Docker engine runs
#   scripts/images.sh --binaries   only the binaries (steps 3-6)
#
# Steps (e2e/node/README.md says why each is as it is):
#   1. Docker engine: Debian's docker.io (installed when missing, as root);
#      on hosts whose capability bounding set lacks CAP_SYS_RESOURCE,
#      scripts/runc-nosysres as dockerd's default runtime (merged into
#      /etc/docker/daemon.json); dockerd started when none answers.
#   2. etcd, SeaweedFS and helm binaries of scripts/deps.sh.
#   3-6. kind $KIND_VERSION, the 7 Kubernetes binaries (kube-apiserver and
#      kubectl reused from scripts/deps.sh's build), CoreDNS (plugin subset,
#      e2e/node/coredns.go) and pause, from the Go module proxy and the
#      module cache, into
#        ${GAZ_CACHE:-~/.cache/gazette-c}/kind-<kind version>-<kube version>/
#      {bin/kind (+ kubectl, helm links), kube/, coredns/, pause/, logs/, e2e.env}
#   7. the image tarball of an earlier run, when Docker lacks the node image
#   8. debian:12 and debian:12-slim (+ bookworm tags): debootstrap from the
#      host's Debian mirror, then docker import
#   9. gazette-c:dev from the project's Dockerfile (legacy builder)
#   10-12. etcd (under kubeadm's etcd tag), kind.local/seaweedfs:<version>,
#      kind.local/echo:v1
#   13. when the node image is missing or stale: the component images under
#      the tags kubeadm expects, kind.local/netbase:v1, kind.local/tinynet:v1
#   14. kind.local/node:<kube version>: e2e/node/Dockerfile, then kind's
#      image preload done by hand (ctr import) and docker commit
#   15. the image tarball ~/.cache/gazette-c/kind-images-<key>.tar.zst
#      (IMAGES_TARBALL=0: neither load nor save it)
# Every image step is skipped when Docker holds the image (docker image
# inspect); images made from e2e/node carry a label with the hash of their
# inputs (e2e/node/* but *.md, this script, the versions) and are rebuilt
# when it changes, the images they replace removed. The tarball freezes
# Debian's packages: delete it to take their updates. gazette-c:dev is built only when missing (`make image` rebuilds
# it; run-kind.sh builds its own gazette-c:e2e from the tree every time).
#
# Needs: Debian 12 and root for apt-get and dockerd, go (GOTOOLCHAIN=local)
# for the builds, gcc for pause, jq, zstd; network only to Debian's archive
# and the Go module proxy. Build output goes to the cache's logs/; a failed
# step prints its log's tail.
set -euo pipefail
cd "$(dirname "$0")/.."

KIND_VERSION=v0.31.0
deps_var() { sed -n "s/^$1=//p" scripts/deps.sh; }
KUBE_VERSION=$(deps_var KUBE_VERSION)
ETCD_VERSION=$(deps_var ETCD_VERSION)
WEED_VERSION=$(deps_var WEED_VERSION)
CACHE=${GAZ_CACHE:-$HOME/.cache/gazette-c}
KC=$CACHE/kind-$KIND_VERSION-$KUBE_VERSION
BIN=$KC/bin
KUBE_BIN=$KC/kube
LOGS=$KC/logs
NODE_SRC=e2e/node
NODE_IMAGE=kind.local/node:$KUBE_VERSION
NETBASE_IMAGE=kind.local/netbase:v1
TINYNET_IMAGE=kind.local/tinynet:v1
ECHO_IMAGE=kind.local/echo:v1
PROJECT_IMAGE=${PROJECT_IMAGE:-gazette-c:dev}
KUBE_CMDS=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
LABEL=dev.gazette-c.inputs
T0=$SECONDS

log() { echo "images: $*" >&2; }
die() { log "$*"; exit 1; }

go_env() {
	export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
	export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
}

# step NAME FUNC...: runs FUNC and prints its wall time; FUNC calls skip
# WHY when what it makes was there already.
SKIPPED=
skip() { SKIPPED=$1; }
step() {
	local name=$1 s=$SECONDS
	shift
	SKIPPED=
	"$@"
	if [ -n "$SKIPPED" ]; then
		log "$(printf '%-22s %4d s  (%s)' "$name" $((SECONDS - s)) "$SKIPPED")"
	else
		log "$(printf '%-22s %4d s' "$name" $((SECONDS - s)))"
	fi
}

# logged NAME CMD...: runs CMD (a function too) with its output in
# $LOGS/NAME.log; on failure prints the log's tail. Run as a background
# job and waited for, so that set -e holds inside CMD.
logged() {
	local lf=$LOGS/$1.log rc=0
	shift
	mkdir -p "$LOGS"
	# <&0: a background job would otherwise read /dev/null, not our stdin.
	"$@" >"$lf" 2>&1 <&0 &
	wait $! || rc=$?
	if [ $rc != 0 ]; then
		tail -n 40 "$lf" >&2
		log "failed (status $rc): $*; full log: $lf"
		return $rc
	fi
}

# have IMAGE [KEY]: Docker holds IMAGE (with label $LABEL=KEY if given).
have() {
	local got
	got=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null) || return 1
	[ -z "${2:-}" ] || [ "$got" = "$2" ]
}

# build TAG DIR [ARGS...]: legacy-builder build of DIR (Dockerfile on stdin
# when ARGS has -f -), labelled with the inputs key.
build() {
	local tag=$1 dir=$2
	shift 2
	stale "$tag"
	DOCKER_BUILDKIT=0 docker build --label "$LABEL=$KEY" -t "$tag" "$@" "$dir"
}

# stale TAG: TAG is about to be replaced; its old image is removed at the
# end (drop_stale) unless something still uses it. A file, not a
# variable: builds run in subshells (logged).
stale() {
	docker image inspect -f '{{.Id}}' "$1" >>"$KC/stale-ids" 2>/dev/null || true
}
drop_stale() {
	[ -s "$KC/stale-ids" ] || return 0
	local id pass
	for pass in 1 2 3; do # a parent goes once its children are gone
		while read -r id; do docker image rm "$id" >/dev/null 2>&1 || true; done <"$KC/stale-ids"
	done
	rm -f "$KC/stale-ids"
}

# ---- 1. the engine ---------------------------------------------------------------

need_pkgs() {
	local p m=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || m+=("$p")
	done
	[ ${#m[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing Debian packages: ${m[*]} (install them as root)"
	log "installing Debian packages: ${m[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${m[@]}" >/dev/null
}

# The runc wrapper, only where bit 24 (CAP_SYS_RESOURCE) of the bounding
# set is clear; daemon.json is merged, never overwritten. A running dockerd
# reloads its runtimes on SIGHUP.
has_sys_resource() {
	local capbnd
	capbnd=$(awk '/^CapBnd/ {print $2}' /proc/self/status)
	[ $((0x$capbnd >> 24 & 1)) = 1 ]
}

configure_runtime() {
	local cur new
	! has_sys_resource || return 0
	cmp -s scripts/runc-nosysres /usr/local/bin/runc-nosysres ||
		install -m 755 scripts/runc-nosysres /usr/local/bin/runc-nosysres
	mkdir -p /etc/docker
	cur=$(jq -S . /etc/docker/daemon.json 2>/dev/null || echo '{}')
	new=$(jq -S '.runtimes["runc-nosysres"] = {path: "/usr/local/bin/runc-nosysres"}
		| ."default-runtime" = "runc-nosysres"' <<<"$cur")
	[ "$cur" != "$new" ] || return 0
	log "CAP_SYS_RESOURCE is not in the bounding set: runc-nosysres becomes dockerd's default runtime"
	echo "$new" >/etc/docker/daemon.json.tmp
	mv /etc/docker/daemon.json.tmp /etc/docker/daemon.json
	if pidof dockerd >/dev/null; then
		kill -HUP "$(pidof dockerd)"
		sleep 1
	fi
}

engine() {
	need_pkgs docker.io debootstrap jq zstd binutils
	[ "$(id -u)" != 0 ] || configure_runtime
	if docker info >/dev/null 2>&1; then
		skip "dockerd runs"
	else
		[ "$(id -u)" = 0 ] || die "no Docker engine answers, and starting dockerd needs root"
		log "starting dockerd (log: /var/log/dockerd.log)"
		setsid -f dockerd >>/var/log/dockerd.log 2>&1 </dev/null
		for _ in $(seq 1 60); do
			docker info >/dev/null 2>&1 && break
			sleep 1
		done
	fi
	docker info >/dev/null 2>&1 || die "no Docker engine (see /var/log/dockerd.log)"
	if ! has_sys_resource && [ "$(docker info -f '{{.DefaultRuntime}}')" != runc-nosysres ]; then
		die "CAP_SYS_RESOURCE is missing and dockerd's default runtime is not runc-nosysres: restart dockerd"
	fi
}

# ---- 2-6. binaries ---------------------------------------------------------------------

ETCD_DIR=$(scripts/deps.sh --etcd-dir)
WEED_DIR=$(scripts/deps.sh --weed-dir)
HELM_DIR=$(scripts/deps.sh --helm-dir)
DEPS_KUBE_DIR=$(scripts/deps.sh --kube-dir)

deps_bins() {
	local built=
	[ -x "$ETCD_DIR/etcd" ] && [ -x "$ETCD_DIR/etcdctl" ] || die "no etcd in $ETCD_DIR: run scripts/deps.sh"
	[ -x "$WEED_DIR/weed" ] || { logged deps-weed scripts/deps.sh --install-weed; built=1; }
	[ -x "$HELM_DIR/helm" ] || { logged deps-helm scripts/deps.sh --build-helm; built=1; }
	[ -n "$built" ] || skip "scripts/deps.sh installed them"
}

build_kind() {
	local tmp
	tmp=$(mktemp -d)
	go_env
	cd "$tmp"
	go mod init rig.local/kindbuild
	go get "sigs.k8s.io/kind@$KIND_VERSION"
	go build -trimpath -ldflags "-s -w" -o "$tmp/kind" sigs.k8s.io/kind
	mkdir -p "$BIN"
	mv "$tmp/kind" "$BIN/kind"
	rm -rf "$tmp"
}

bin_kind() {
	if [ -x "$BIN/kind" ]; then skip cached; else logged kind build_kind; fi
	ln -sfn ../kube/kubectl "$BIN/kubectl"
	ln -sfn "$HELM_DIR/helm" "$BIN/helm"
}

# build_kube CMD...: scripts/deps.sh's build_kube recipe for more commands:
# a throwaway module replacing k8s.io/kubernetes's ./staging modules by
# their published v0.Y.Z tags, one go build, the version stamped (kind
# reads `kubeadm version -o short` as the cluster's version).
build_kube() {
	local tmp mod staging minor pkgs=() c
	tmp=$(mktemp -d)
	go_env
	cd "$tmp"
	go mod init rig.local/kubebuild
	mod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | jq -r .GoMod)
	staging="v0.${KUBE_VERSION#v1.}"
	minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
	for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$mod"); do
		go mod edit -replace="$m=$m@$staging"
	done
	for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	go get "${pkgs[@]/%/@$KUBE_VERSION}"
	local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
	ld="$ld -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	ld="$ld -X k8s.io/component-base/version.gitTreeState=clean"
	ld="$ld -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
	ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	ld="$ld -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
	mkdir -p "$tmp/out"
	go build -trimpath -ldflags "$ld" -o "$tmp/out/" "${pkgs[@]}"
	mkdir -p "$KUBE_BIN"
	mv "$tmp"/out/* "$KUBE_BIN/"
	rm -rf "$tmp"
}

# The version a Kubernetes binary reports, e.g. v1.35.4.
kube_version_of() {
	case ${1##*/} in
	kubectl) "$1" version --client -o json 2>/dev/null | jq -r .clientVersion.gitVersion ;;
	*) "$1" --version 2>/dev/null | awk '{print $2}' ;;
	esac
}

bin_kube() {
	local c missing=() reused=()
	mkdir -p "$KUBE_BIN"
	for c in "${KUBE_CMDS[@]}"; do
		[ -x "$KUBE_BIN/$c" ] && continue
		if [ -x "$DEPS_KUBE_DIR/$c" ] && [ "$(kube_version_of "$DEPS_KUBE_DIR/$c")" = "$KUBE_VERSION" ]; then
			cp "$DEPS_KUBE_DIR/$c" "$KUBE_BIN/$c"
			reused+=("$c")
		else
			missing+=("$c")
		fi
	done
	[ ${#reused[@]} -eq 0 ] || log "kubernetes: ${reused[*]} from scripts/deps.sh's build"
	if [ ${#missing[@]} -gt 0 ]; then
		log "kubernetes: building ${missing[*]} $KUBE_VERSION (about 8 min cold, 2 min with a warm Go cache)"
		logged kube build_kube "${missing[@]}"
	elif [ ${#reused[@]} -eq 0 ]; then
		skip cached
	fi
	[ "$("$KUBE_BIN/kubeadm" version -o short)" = "$KUBE_VERSION" ] || die "kubeadm does not say $KUBE_VERSION"
	# The tags kubeadm pulls (etcd, CoreDNS and pause versions follow).
	[ -s "$KUBE_BIN/images.txt" ] ||
		"$KUBE_BIN/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" >"$KUBE_BIN/images.txt"
}

# tag_of NAME: kubeadm's tag for component NAME (kube-apiserver, etcd, ...).
tag_of() { awk -v n="$1" '{ r = $1; sub(/:[^:]*$/, "", r); sub(/.*\//, "", r) } r == n {print; exit}' "$KUBE_BIN/images.txt"; }

build_coredns() {
	local tmp ver=$1
	tmp=$(mktemp -d)
	go_env
	cp "$NODE_SRC/coredns.go" "$tmp/main.go"
	cd "$tmp"
	go mod init rig.local/corednsbuild
	go get "github.com/coredns/coredns@$ver"
	go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .
	mkdir -p "$KC/coredns"
	mv "$tmp/coredns" "$KC/coredns/coredns"
	rm -rf "$tmp"
}

bin_coredns() {
	[ -x "$KC/coredns/coredns" ] && { skip cached; return 0; }
	logged coredns build_coredns "$(tag_of coredns | sed 's/.*://')"
}

# pause from Kubernetes' own pause.c (in the module zip), static.
bin_pause() {
	[ -x "$KC/pause/pause" ] && { skip cached; return 0; }
	go_env
	local src ver
	src=$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | jq -r .Dir)/build/pause/linux/pause.c
	ver=$(tag_of pause | sed 's/.*://')
	mkdir -p "$KC/pause"
	gcc -Os -static -DVERSION="v$ver-gazette-c" -o "$KC/pause/pause.tmp" "$src"
	strip "$KC/pause/pause.tmp"
	mv "$KC/pause/pause.tmp" "$KC/pause/pause"
}

# ---- 7-15. images ------------------------------------------------------------------------

weed_version() { "$WEED_DIR/weed" version 2>/dev/null | awk '/^version/ {print $3; exit}'; }

# The inputs of everything made from e2e/node, for labels and the tarball.
inputs_key() {
	{
		echo "$KIND_VERSION $KUBE_VERSION $ETCD_VERSION $WEED_VERSION"
		find "$NODE_SRC" -type f ! -name '*.md' | LC_ALL=C sort | xargs sha256sum
		sha256sum scripts/images.sh
	} | sha256sum | cut -c1-16
}

tarball_images() {
	echo debian:12 debian:bookworm debian:12-slim debian:bookworm-slim "$NODE_IMAGE" \
		"$SEAWEED_IMAGE" "$ETCD_IMAGE" "$ECHO_IMAGE"
}

tarball_load() {
	[ "${IMAGES_TARBALL:-1}" = 1 ] || { skip "IMAGES_TARBALL=0"; return 0; }
	have "$NODE_IMAGE" "$KEY" && { skip "node image present"; return 0; }
	[ -f "$TARBALL" ] || { skip "no tarball"; return 0; }
	zstd -dc "$TARBALL" | docker load -q >/dev/null
}

tarball_save() {
	[ "${IMAGES_TARBALL:-1}" = 1 ] || { skip "IMAGES_TARBALL=0"; return 0; }
	[ -f "$TARBALL" ] && { skip cached; return 0; }
	# shellcheck disable=SC2046
	docker save $(tarball_images) | zstd -q -T2 -3 >"$TARBALL.tmp"
	mv "$TARBALL.tmp" "$TARBALL"
	find "$CACHE" -maxdepth 1 -name 'kind-images-*.tar.zst' ! -name "${TARBALL##*/}" -delete
}

# A rootfs that looks like the official image's: deb822 sources of the
# host (bookworm, -updates, -security), the official apt.conf.d tweaks, no
# caches, lists, logs or host names.
tidy_rootfs() {
	local r=$1
	rm -f "$r/etc/apt/sources.list"
	cp /etc/apt/sources.list.d/debian.sources "$r/etc/apt/sources.list.d/debian.sources"
	local a=$r/etc/apt/apt.conf.d
	cat >"$a/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
	echo 'Acquire::GzipIndexes "true";' >"$a/docker-gzip-indexes"
	echo 'Acquire::Languages "none";' >"$a/docker-no-languages"
	echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$a/docker-autoremove-suggests"
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
		"$r"/var/log/*.log "$r"/var/log/apt/* "$r"/tmp/* "$r"/var/tmp/*
	: >"$r/etc/hostname"
	: >"$r/etc/resolv.conf"
}

# The slim variant: dpkg keeps docs (but copyrights), man pages, info and
# translations out from now on; those already there go.
slim_rootfs() {
	local r=$1
	cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# slim image: no documentation but the copyright files, no manuals, no translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
	find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$r"/usr/share/groff/* "$r"/usr/share/info/* "$r"/usr/share/linda/* \
		"$r"/usr/share/lintian/* "$r"/usr/share/man/*
	find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
}

import_rootfs() { # import_rootfs DIR TAG...
	local dir=$1 t
	shift
	tar --numeric-owner -C "$dir" -c . | docker import \
		--change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		- "$1"
	for t in "${@:2}"; do docker tag "$1" "$t"; done
}

build_base() {
	local work mirror
	work=$(mktemp -d /var/tmp/gazette-c-debootstrap.XXXXXX)
	mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
	debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror"
	tidy_rootfs "$work/rootfs"
	import_rootfs "$work/rootfs" debian:12 debian:bookworm
	cp -a "$work/rootfs" "$work/slim"
	slim_rootfs "$work/slim"
	import_rootfs "$work/slim" debian:12-slim debian:bookworm-slim
	rm -rf "$work"
}

base_images() {
	if have debian:12 && have debian:12-slim; then skip present; return 0; fi
	[ -f /etc/apt/sources.list.d/debian.sources ] || die "no /etc/apt/sources.list.d/debian.sources to take the mirror from"
	logged debootstrap build_base
}

project_image() {
	have "$PROJECT_IMAGE" && { skip present; return 0; }
	logged project env DOCKER_BUILDKIT=0 docker build -t "$PROJECT_IMAGE" .
	# The three programs start in the image (their --help; gazette's and
	# gazctl's exit 1 after it, as Gazette's do).
	local c out
	for c in "gazette serve" gazctl gazette-operator; do
		# shellcheck disable=SC2086
		out=$(docker run --rm "$PROJECT_IMAGE" $c --help 2>&1) || true
		grep -q '^Usage' <<<"$out" || die "$PROJECT_IMAGE: \`$c --help\` printed no usage: $out"
	done
}

# ctx_of FILE...: a fresh build context (on the cache's file system, so
# hard links work) holding FILEs.
ctx_of() {
	local d f
	d=$(mktemp -d "$KC/ctx.XXXXXX")
	for f in "$@"; do ln "$f" "$d/" 2>/dev/null || cp "$f" "$d/"; done
	echo "$d"
}

etcd_image() {
	have "$ETCD_IMAGE" "$KEY" && { skip present; return 0; }
	local d
	d=$(ctx_of "$ETCD_DIR/etcd" "$ETCD_DIR/etcdctl")
	logged etcd-image build "$ETCD_IMAGE" "$d" -f - <<'EOF'
FROM debian:12-slim
COPY etcd etcdctl /usr/local/bin/
EOF
	rm -rf "$d"
}

seaweed_image() {
	have "$SEAWEED_IMAGE" "$KEY" && { skip present; return 0; }
	local d
	d=$(mktemp -d "$KC/ctx.XXXXXX")
	cp "$WEED_DIR/weed" "$d/weed"
	strip "$d/weed"
	logged seaweedfs-image build "$SEAWEED_IMAGE" "$d" -f - <<'EOF'
FROM debian:12-slim
COPY weed /usr/bin/weed
ENTRYPOINT ["/usr/bin/weed"]
EOF
	rm -rf "$d"
}

echo_image() {
	have "$ECHO_IMAGE" "$KEY" && { skip present; return 0; }
	logged echo-image build "$ECHO_IMAGE" "$NODE_SRC" -f "$NODE_SRC/echo.Dockerfile"
}

# component TAG: one component image under kubeadm's tag.
component() {
	local tag=$1 name d
	name=${tag%:*}
	name=${name##*/}
	have "$tag" "$KEY" && return 0
	case $name in
	kube-apiserver | kube-controller-manager | kube-scheduler)
		d=$(ctx_of "$KUBE_BIN/$name")
		printf 'FROM debian:12-slim\nCOPY %s /usr/local/bin/%s\n' "$name" "$name" |
			logged "image-$name" build "$tag" "$d" -f - ;;
	kube-proxy)
		d=$(ctx_of "$KUBE_BIN/kube-proxy")
		printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$NETBASE_IMAGE" |
			logged image-kube-proxy build "$tag" "$d" -f - ;;
	coredns)
		d=$(ctx_of "$KC/coredns/coredns")
		printf 'FROM debian:12-slim\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' |
			logged image-coredns build "$tag" "$d" -f - ;;
	pause)
		d=$(ctx_of "$KC/pause/pause")
		printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' |
			logged image-pause build "$tag" "$d" -f - ;;
	etcd) return 0 ;; # etcd_image
	*) die "no recipe for kubeadm's image $tag" ;;
	esac
	rm -rf "$d"
}

component_images() {
	have "$NODE_IMAGE" "$KEY" && { skip "node image present"; return 0; }
	have "$NETBASE_IMAGE" "$KEY" ||
		logged netbase-image build "$NETBASE_IMAGE" "$NODE_SRC" -f "$NODE_SRC/netbase.Dockerfile"
	have "$TINYNET_IMAGE" "$KEY" ||
		logged tinynet-image build "$TINYNET_IMAGE" "$NODE_SRC" -f "$NODE_SRC/tinynet.Dockerfile"
	local t
	while read -r t; do component "$t"; done <"$KUBE_BIN/images.txt"
}

PRELOAD=
# preload BASE TAG: kind's node-image preload, without its pulls: the
# component images go into containerd's k8s.io namespace of a container
# of BASE (pinned, as kind pins them), which is committed as TAG.
preload() {
	local base=$1 tag=$2 img
	PRELOAD=gazette-c-node-preload-$$
	docker rm -f "$PRELOAD" >/dev/null 2>&1 || true
	docker run -d --name "$PRELOAD" --entrypoint sleep --security-opt seccomp=unconfined "$base" infinity
	docker exec "$PRELOAD" bash -c 'nohup containerd >/var/log/containerd-preload.log 2>&1 &'
	for _ in $(seq 1 150); do
		docker exec "$PRELOAD" ctr version >/dev/null 2>&1 && break
		sleep 0.2
	done
	for img in $(awk '{print $1}' "$KUBE_BIN/images.txt") "$TINYNET_IMAGE"; do
		docker save "$img" | docker exec -i "$PRELOAD" ctr --namespace=k8s.io images import \
			--label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests -
	done
	docker exec "$PRELOAD" bash -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done;
		rm -f /var/log/containerd-preload.log'
	stale "$tag"
	docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
		--change "LABEL $LABEL=$KEY" "$PRELOAD" "$tag"
	docker rm -f "$PRELOAD"
	PRELOAD=
}

node_image() {
	have "$NODE_IMAGE" "$KEY" && { skip present; return 0; }
	local pause_tag ctx kind_src
	pause_tag=$(tag_of pause)
	grep -q "sandbox_image = \"$pause_tag\"" "$NODE_SRC/containerd-config.toml" ||
		die "$NODE_SRC/containerd-config.toml: sandbox_image must be kubeadm's $pause_tag"
	go_env
	kind_src=$(cd "$(mktemp -d)" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)
	ctx=$(mktemp -d "$KC/ctx.XXXXXX")
	cp -r "$NODE_SRC"/. "$ctx/"
	cp -r "$kind_src/images/base/files" "$ctx/kind-files"
	chmod -R u+w "$ctx/kind-files"
	mkdir "$ctx/bin"
	for c in kubeadm kubelet kubectl; do ln "$KUBE_BIN/$c" "$ctx/bin/$c" 2>/dev/null || cp "$KUBE_BIN/$c" "$ctx/bin/"; done
	"$KUBE_BIN/kubeadm" version -o short >"$ctx/version"
	logged node-base build "$NODE_IMAGE-base" "$ctx"
	rm -rf "$ctx"
	logged node-preload preload "$NODE_IMAGE-base" "$NODE_IMAGE"
	docker image rm "$NODE_IMAGE-base" >/dev/null
}

write_env() {
	cat >"$KC/e2e.env.tmp" <<EOF
export KIND_NODE_IMAGE=$NODE_IMAGE
export ETCD_IMAGE=$ETCD_IMAGE
export MINIO_IMAGE=$SEAWEED_IMAGE
export MINIO_MANIFEST=$PWD/e2e/manifests/seaweedfs.yaml
export EXTRA_IMAGES=$SEAWEED_IMAGE
export ECHO_IMAGE=$ECHO_IMAGE
export PATH=$BIN:"\$PATH"
EOF
	mv "$KC/e2e.env.tmp" "$KC/e2e.env"
}

cleanup() {
	[ -z "$PRELOAD" ] || docker rm -f "$PRELOAD" >/dev/null 2>&1 || true
	rm -rf "$KC"/ctx.* 2>/dev/null || true
}
trap cleanup EXIT

case "${1:-}" in
--print-env)
	[ -f "$KC/e2e.env" ] || die "no $KC/e2e.env yet: run scripts/images.sh first"
	cat "$KC/e2e.env"
	exit 0
	;;
--docker)
	step engine engine
	exit 0
	;;
--binaries | "") ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac

mkdir -p "$KC"
if [ "${1:-}" = --binaries ]; then
	step deps deps_bins
	step kind bin_kind
	step kubernetes bin_kube
	step coredns bin_coredns
	step pause bin_pause
	exit 0
fi
step engine engine
step deps deps_bins
step kind bin_kind
step kubernetes bin_kube
step coredns bin_coredns
step pause bin_pause

KEY=$(inputs_key)
TARBALL=$CACHE/kind-images-$KEY.tar.zst
ETCD_IMAGE=$(tag_of etcd)
SEAWEED_IMAGE=kind.local/seaweedfs:$(weed_version)
[ "$SEAWEED_IMAGE" != kind.local/seaweedfs: ] || die "cannot tell $WEED_DIR/weed's version"
step tarball-load tarball_load
step debian-base base_images
step "$PROJECT_IMAGE" project_image
step etcd etcd_image
step seaweedfs seaweed_image
step echo echo_image
step components component_images
step node node_image
step tarball-save tarball_save
drop_stale
write_env
log "all done in $((SECONDS - T0)) s; env: scripts/images.sh --print-env"
