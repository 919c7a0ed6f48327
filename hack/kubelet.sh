#!/usr/bin/env bash
# hack/kubelet.sh: the upstream kubelet v1.36.3, built only so hack/e2ebench can measure it on the
# same static-pod workload as nodekit (issue #10: "<= 1/5 of the kubelet's agent CPU seconds").
# CI does not build it (an optimised build takes 10-20 minutes of 2 busy cores); run it by hand.
#
#   hack/kubelet.sh build   build kubelet from hack/kubelet (its own Go module; the root module never
#                           imports k8s.io/kubernetes) into the cache dir, CGO_ENABLED=0 and optimised
#                           as the release binaries are; skipped when the cached binary was built from
#                           the same hack/kubelet/go.sum
#   hack/kubelet.sh built   exit 0 when the cached binary is there and current
#   hack/kubelet.sh path    print the binary's path (exit 1 when it is not built)
#   hack/kubelet.sh tidy    go mod tidy of hack/kubelet (the main package sits in _kubelet/, which
#                           tidy alone does not see)
#
# Environment:
#   NODEKIT_KUBELET_CACHE   binary cache dir (default /var/cache/nodekit/kubelet-v1.36.3)
#
# Then, with a private containerd (hack/containerd.sh start; . <dir>/env):
#   go run ./hack/e2ebench -kubelet "$(hack/kubelet.sh path)" ...
set -euo pipefail

VERSION="v1.36.3"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODDIR="$REPO/hack/kubelet"
CACHE="${NODEKIT_KUBELET_CACHE:-/var/cache/nodekit/kubelet-$VERSION}"
BIN="$CACHE/kubelet"
STAMP="$CACHE/go.sum.sha256"

log() { echo "kubelet.sh: $*" >&2; }

gosum_hash() { sha256sum "$MODDIR/go.sum" | cut -d' ' -f1; }

cmd_built() {
	[ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(gosum_hash)" ]
}

cmd_build() {
	if cmd_built; then
		log "cached: $BIN"
		return 0
	fi
	mkdir -p "$CACHE"
	log "building kubelet $VERSION into $BIN (takes 10-20 minutes on a fresh machine)"
	local start=$SECONDS
	# Optimised (no -N -l): the benchmark compares CPU seconds, so the binary is
	# built as a release one is. -s -w only drop symbols.
	(cd "$MODDIR" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' -o "$BIN.tmp" ./_kubelet)
	mv -f "$BIN.tmp" "$BIN"
	gosum_hash >"$STAMP"
	log "built $BIN in $((SECONDS - start))s"
}

cmd_path() {
	if ! cmd_built; then
		log "not built (or stale): run '$0 build'"
		return 1
	fi
	echo "$BIN"
}

cmd_tidy() {
	(
		cd "$MODDIR"
		trap 'rm -f "$MODDIR/zz_tidy_main.go"' EXIT
		cp _kubelet/main.go zz_tidy_main.go
		GOFLAGS=-mod=mod go mod tidy
	)
}

case "${1:-}" in
build) cmd_build ;;
built) cmd_built ;;
path) cmd_path ;;
tidy) cmd_tidy ;;
*)
	echo "usage: $0 build|built|path|tidy" >&2
	exit 2
	;;
esac
