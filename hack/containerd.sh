#!/usr/bin/env bash
# hack/containerd.sh: a private containerd (CRI) for nodekit's e2e tests.
#
#   hack/containerd.sh install   apt-get install containerd, runc, busybox-static,
#                                containernetworking-plugins (as root)
#   hack/containerd.sh build     build containerd 2.x (CONTAINERD2_VERSION) and its runc shim from the
#                                Go module proxy into the cache dir; skipped when they are there
#   hack/containerd.sh built     exit 0 when the containerd 2.x build is cached
#   hack/containerd.sh start     write a config, start containerd, import the test images,
#                                write <dir>/env and print it
#   hack/containerd.sh restart   a reboot: kill and delete every container, stop containerd, then
#                                start it again on the same socket and root (images kept)
#   hack/containerd.sh stop      kill every container, stop containerd, unmount, remove <dir>
#   hack/containerd.sh env       print the env lines
#
# Which containerd: NODEKIT_CONTAINERD=1.6 (default) is Debian's containerd 1.6 from PATH;
# NODEKIT_CONTAINERD=2 is containerd v2.4.2 (with its runc shim and ctr) built by '$0 build' into
# NODEKIT_CONTAINERD2_CACHE (default /var/cache/nodekit/containerd-v2.4.2; about a minute per
# binary on a warm module cache, so it is cached like hack/kube-apiserver.sh's build), configured
# from its own `containerd config default` (config version 3+: the sandbox image key is `sandbox`)
# with the same images, CNI and restrict_oom_score_adj. Both run Debian's runc. Once started, the
# choice is kept in <dir>/flavour, so restart and stop need no variable.
#
# Everything lives under NODEKIT_CONTAINERD_DIR (default /tmp/nodekit-containerd): its own
# --root, --state, socket, runc root and log, so a system containerd is never touched.
# Pod networking: a CNI bridge (nk-<hash of dir>, host-local IPAM on a private /24, no masquerade)
# from Debian's containernetworking-plugins, so the runtime reports NetworkReady and pods without
# hostNetwork get an address reachable from the host. Override the subnet with NODEKIT_CNI_SUBNET.
# The env lines are:
#   NODEKIT_CRI_ENDPOINT=unix://<dir>/containerd.sock
#   NODEKIT_PAUSE_IMAGE=localhost/nodekit/pause:1
#   NODEKIT_BUSYBOX_IMAGE=localhost/nodekit/busybox:1
#   NODEKIT_CONTAINERD=1.6 or 2 (which containerd answers on the endpoint)
# Use them with: set -a; . <dir>/env; set +a
set -euo pipefail

DIR="${NODEKIT_CONTAINERD_DIR:-/tmp/nodekit-containerd}"
SOCK="$DIR/containerd.sock"
PIDFILE="$DIR/containerd.pid"
LOG="$DIR/containerd.log"
CONFIG="$DIR/config.toml"
RUNC_ROOT="$DIR/runc"
PAUSE_IMAGE="localhost/nodekit/pause:1"
BUSYBOX_IMAGE="localhost/nodekit/busybox:1"
START_TIMEOUT="${NODEKIT_CONTAINERD_START_TIMEOUT:-30}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CNI_PLUGINS="${NODEKIT_CNI_PLUGINS:-/usr/lib/cni}"
# One bridge and subnet per state dir, so private instances side by side don't collide.
DIR_HASH="$(printf '%s' "$DIR" | sha256sum | cut -c1-8)"
CNI_BRIDGE="nk-$DIR_HASH"
CNI_SUBNET="${NODEKIT_CNI_SUBNET:-10.$((0x${DIR_HASH:0:2} % 200 + 20)).$((0x${DIR_HASH:2:2})).0/24}"

CONTAINERD2_VERSION="v2.4.2"
CONTAINERD2_CACHE="${NODEKIT_CONTAINERD2_CACHE:-/var/cache/nodekit/containerd-$CONTAINERD2_VERSION}"
CONTAINERD2_BINS=(containerd containerd-shim-runc-v2 ctr)
# The flavour: the variable, else what this state dir was started with, else 1.6.
FLAVOUR="${NODEKIT_CONTAINERD:-}"
if [ -z "$FLAVOUR" ] && [ -f "$DIR/flavour" ]; then
	FLAVOUR="$(cat "$DIR/flavour")"
fi
FLAVOUR="${FLAVOUR:-1.6}"
case "$FLAVOUR" in
1.6 | 1) FLAVOUR=1.6 ;;
2 | 2.x | "$CONTAINERD2_VERSION" | "${CONTAINERD2_VERSION#v}")
	FLAVOUR=2
	# containerd finds its shim on PATH, and the 2.x ctr goes with it.
	export PATH="$CONTAINERD2_CACHE:$PATH"
	;;
*)
	echo "containerd.sh: NODEKIT_CONTAINERD=$FLAVOUR: want 1.6 or 2" >&2
	exit 2
	;;
esac

log() { echo "containerd.sh: $*" >&2; }

ctr_() { ctr -a "$SOCK" "$@"; }

env_lines() {
	echo "NODEKIT_CRI_ENDPOINT=unix://$SOCK"
	echo "NODEKIT_PAUSE_IMAGE=$PAUSE_IMAGE"
	echo "NODEKIT_BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
	echo "NODEKIT_CONTAINERD=$FLAVOUR"
}

# cmd_built: exit 0 when every containerd 2.x binary is in the cache.
cmd_built() {
	local b
	for b in "${CONTAINERD2_BINS[@]}"; do
		[ -x "$CONTAINERD2_CACHE/$b" ] || return 1
	done
	[ "$(cat "$CONTAINERD2_CACHE/version" 2>/dev/null)" = "$CONTAINERD2_VERSION" ]
}

# cmd_build builds containerd 2.x, its runc shim and ctr from the Go module proxy into the
# cache dir (never into the repository). No cgo and no btrfs/devmapper/zfs snapshotters: no C
# compiler or headers needed, and nothing the tests use is lost.
cmd_build() {
	if cmd_built; then
		log "cached: containerd $CONTAINERD2_VERSION in $CONTAINERD2_CACHE"
		return 0
	fi
	if ! command -v go >/dev/null 2>&1; then
		export PATH="$PATH:/usr/local/go/bin"
	fi
	local tmp="$CONTAINERD2_CACHE.tmp.$$" start=$SECONDS mod=github.com/containerd/containerd/v2
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "building containerd $CONTAINERD2_VERSION into $CONTAINERD2_CACHE"
	if ! (cd "$tmp" && GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags='-s -w' \
		-tags "no_btrfs no_devmapper no_zfs" \
		"$mod/cmd/containerd@$CONTAINERD2_VERSION" "$mod/cmd/containerd-shim-runc-v2@$CONTAINERD2_VERSION" \
		"$mod/cmd/ctr@$CONTAINERD2_VERSION"); then
		rm -rf "$tmp"
		return 1
	fi
	echo "$CONTAINERD2_VERSION" >"$tmp/version"
	rm -rf "$CONTAINERD2_CACHE"
	mv "$tmp" "$CONTAINERD2_CACHE"
	log "built containerd $CONTAINERD2_VERSION in $((SECONDS - start))s"
}

cmd_install() {
	local need=()
	command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
	command -v runc >/dev/null 2>&1 || need+=(runc)
	[ -x "$CNI_PLUGINS/bridge" ] && [ -x "$CNI_PLUGINS/loopback" ] && [ -x "$CNI_PLUGINS/host-local" ] ||
		need+=(containernetworking-plugins)
	if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
		need+=(busybox-static)
	fi
	if [ "${#need[@]}" -eq 0 ]; then
		log "containerd, runc, busybox-static and the CNI plugins are installed"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		log "need root to install: ${need[*]}"
		return 1
	fi
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${need[@]}" >/dev/null
	# The Debian package may start a system containerd; ours never uses it.
}

running() {
	[ -f "$PIDFILE" ] || return 1
	local pid
	pid="$(cat "$PIDFILE")"
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	ctr_ version >/dev/null 2>&1
}

write_config() {
	mkdir -p "$DIR/root" "$DIR/state" "$RUNC_ROOT" "$DIR/opt" "$DIR/cni/bin" "$DIR/cni/net.d"
	if [ "$FLAVOUR" = 2 ]; then
		write_config2
		write_cni
		return
	fi
	cat >"$CONFIG" <<EOF
# Written by hack/containerd.sh for containerd 1.6 (config version 2).
version = 2
root = "$DIR/root"
state = "$DIR/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "$SOCK"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$DIR/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    # This machine lacks CAP_SYS_RESOURCE: never try to lower oom_score_adj.
    restrict_oom_score_adj = true
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    systemd_cgroup = false
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    stats_collect_period = 10

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$DIR/cni/bin"
      conf_dir = "$DIR/cni/net.d"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$RUNC_ROOT"
EOF
	write_cni
}

# write_config2 writes containerd 2.x's config: its own `containerd config default` (config
# version 3 or 4) with the settings of the 1.6 config above changed in place. Every edit must
# hit exactly one line of the default, so a new containerd that renames a key fails here, loudly.
write_config2() {
	containerd config default >"$CONFIG.default"
	local edits
	edits="$(
		cat <<EOF
|root|'$DIR/root'
|state|'$DIR/state'
|imports|[]
debug|level|'info'
plugins.'io.containerd.cri.v1.images'.pinned_images|sandbox|'$PAUSE_IMAGE'
plugins.'io.containerd.cri.v1.images'|stats_collect_period|10
plugins.'io.containerd.cri.v1.runtime'|restrict_oom_score_adj|true
plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options|Root|'$RUNC_ROOT'
plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options|SystemdCgroup|false
plugins.'io.containerd.cri.v1.runtime'.cni|bin_dirs|['$DIR/cni/bin']
plugins.'io.containerd.cri.v1.runtime'.cni|conf_dir|'$DIR/cni/net.d'
plugins.'io.containerd.grpc.v1.cri'|stream_server_address|'127.0.0.1'
plugins.'io.containerd.grpc.v1.cri'|stream_server_port|'0'
plugins.'io.containerd.internal.v1.opt'|path|'$DIR/opt'
plugins.'io.containerd.nri.v1.nri'|disable|true
plugins.'io.containerd.server.v1.grpc'|address|'$SOCK'
plugins.'io.containerd.server.v1.ttrpc'|address|'$SOCK.ttrpc'
EOF
	)"
	# NRI off: its socket (/var/run/nri/nri.sock) would be shared by every private instance.
	awk -v edits="$edits" '
		BEGIN {
			n = split(edits, lines, "\n")
			for (i = 1; i <= n; i++) {
				if (lines[i] == "") continue
				split(lines[i], f, "|")
				want[f[1] "|" f[2]] = f[3]
				hits[f[1] "|" f[2]] = 0
			}
			section = ""
		}
		/^[ \t]*\[/ {
			section = $0
			sub(/^[ \t]*\[+/, "", section)
			sub(/\]+[ \t]*$/, "", section)
		}
		/^[ \t]*[A-Za-z_][A-Za-z0-9_]* = / {
			key = $0
			sub(/^[ \t]*/, "", key)
			indent = substr($0, 1, index($0, key) - 1)
			sub(/ = .*/, "", key)
			if ((section "|" key) in want) {
				print indent key " = " want[section "|" key]
				hits[section "|" key]++
				next
			}
		}
		{ print }
		END {
			bad = 0
			for (k in hits) if (hits[k] != 1) { print "containerd.sh: config default: " k " matched " hits[k] " lines" > "/dev/stderr"; bad = 1 }
			exit bad
		}
	' "$CONFIG.default" >"$CONFIG.tmp" || {
		log "cannot adapt containerd's default config ($CONFIG.default)"
		return 1
	}
	{
		echo "# Written by hack/containerd.sh for containerd $CONTAINERD2_VERSION: its 'containerd config default'"
		echo "# with the private root, state, socket, runc root, sandbox image, CNI and restrict_oom_score_adj."
		cat "$CONFIG.tmp"
	} >"$CONFIG"
	rm -f "$CONFIG.tmp"
}

# write_cni links the plugins into the private bin dir and writes the bridge network.
write_cni() {
	local p
	for p in bridge host-local loopback portmap; do
		if [ -x "$CNI_PLUGINS/$p" ]; then
			ln -sf "$CNI_PLUGINS/$p" "$DIR/cni/bin/$p"
		fi
	done
	if [ ! -x "$DIR/cni/bin/bridge" ] || [ ! -x "$DIR/cni/bin/loopback" ]; then
		log "no CNI plugins in $CNI_PLUGINS (run '$0 install'): only host-network pods will run"
		rm -f "$DIR/cni/net.d/10-nodekit.conflist"
		return 0
	fi
	cat >"$DIR/cni/net.d/10-nodekit.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "nodekit",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/ipam",
        "ranges": [[{ "subnet": "$CNI_SUBNET" }]]
      }
    }
  ]
}
EOF
}

# build_images builds the pause binary and both image tarballs under $DIR/images.
build_images() {
	local out="$DIR/images"
	mkdir -p "$out"
	if ! command -v go >/dev/null 2>&1; then
		export PATH="$PATH:/usr/local/go/bin"
	fi
	(
		cd "$REPO"
		CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/pause" ./hack/images/pause
		go build -o "$out/mkimage" ./hack/mkimage
	)
	"$out/mkimage" -kind pause -bin "$out/pause" -name "$PAUSE_IMAGE" -out "$out/pause.tar"
	"$out/mkimage" -kind busybox -bin "$(command -v busybox)" -name "$BUSYBOX_IMAGE" -out "$out/busybox.tar"
}

import_images() {
	local have
	have="$(ctr_ -n k8s.io images ls -q 2>/dev/null || true)"
	if grep -qxF "$PAUSE_IMAGE" <<<"$have" && grep -qxF "$BUSYBOX_IMAGE" <<<"$have"; then
		return 0
	fi
	build_images
	ctr_ -n k8s.io images import "$DIR/images/pause.tar" >/dev/null
	ctr_ -n k8s.io images import "$DIR/images/busybox.tar" >/dev/null
	have="$(ctr_ -n k8s.io images ls -q)"
	for img in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
		if ! grep -qxF "$img" <<<"$have"; then
			log "image $img missing after import; have: $have"
			return 1
		fi
	done
}

cmd_start() {
	if running && [ -n "${NODEKIT_CONTAINERD:-}" ] && [ "$(cat "$DIR/flavour" 2>/dev/null || echo 1.6)" != "$FLAVOUR" ]; then
		log "containerd $(cat "$DIR/flavour" 2>/dev/null || echo 1.6) already runs under $DIR, not $FLAVOUR: stop it first or use another NODEKIT_CONTAINERD_DIR"
		return 1
	elif running; then
		log "containerd already running (pid $(cat "$PIDFILE"), socket $SOCK)"
	else
		if [ "$FLAVOUR" = 2 ] && ! cmd_built; then
			log "containerd $CONTAINERD2_VERSION is not built: run '$0 build' first"
			return 1
		fi
		for b in containerd ctr runc; do
			command -v "$b" >/dev/null 2>&1 || { log "$b not found: run '$0 install' first"; return 1; }
		done
		if [ -e "$PIDFILE" ] || [ -S "$SOCK" ]; then
			log "cleaning up a stale state dir"
			cmd_stop
		fi
		mkdir -p "$DIR"
		echo "$FLAVOUR" >"$DIR/flavour"
		write_config
		log "starting containerd $FLAVOUR ($(command -v containerd); root $DIR, log $LOG)"
		# setsid: containerd (and its shims) must not die with the caller's process group.
		setsid containerd --config "$CONFIG" --root "$DIR/root" --state "$DIR/state" --address "$SOCK" \
			</dev/null >>"$LOG" 2>&1 &
		echo $! >"$PIDFILE"
		local pid deadline
		pid="$(cat "$PIDFILE")"
		deadline=$((SECONDS + START_TIMEOUT))
		until ctr_ version >/dev/null 2>&1; do
			if ! kill -0 "$pid" 2>/dev/null; then
				log "containerd exited during start-up; last log lines:"
				tail -n 30 "$LOG" >&2
				return 1
			fi
			if [ "$SECONDS" -ge "$deadline" ]; then
				log "containerd did not answer on $SOCK within ${START_TIMEOUT}s; last log lines:"
				tail -n 30 "$LOG" >&2
				return 1
			fi
			sleep 0.2
		done
		# The CRI plugin loads after the socket answers and may fail on its own: check it.
		if ! ctr_ plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" && $NF == "ok" { found = 1 } END { exit !found }'; then
			log "containerd's CRI plugin did not load; last log lines:"
			grep -i 'error\|warn' "$LOG" | tail -n 20 >&2
			return 1
		fi
		log "containerd is up (pid $pid)"
	fi
	import_images
	env_lines >"$DIR/env"
	env_lines
}

# kill_containers kills and deletes every task and container containerd knows, in every namespace.
kill_containers() {
	local ns id
	for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
		for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
			ctr_ -n "$ns" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
			local i
			for i in $(seq 1 50); do
				ctr_ -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 && break
				sleep 0.1
			done
		done
		for id in $(ctr_ -n "$ns" containers ls -q 2>/dev/null); do
			ctr_ -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
		done
	done
}

# pids_using_socket lists processes (shims) whose command line names our socket.
pids_using_socket() {
	local p cmdline
	for p in /proc/[0-9]*; do
		cmdline="$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null || true)"
		case "$cmdline" in
		*containerd-shim*"$SOCK"*) echo "${p#/proc/}" ;;
		esac
	done
}

cmd_stop() {
	if [ ! -d "$DIR" ]; then
		log "nothing to stop ($DIR does not exist)"
		return 0
	fi
	local pid=""
	[ -f "$PIDFILE" ] && pid="$(cat "$PIDFILE" 2>/dev/null || true)"
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && ctr_ version >/dev/null 2>&1; then
		kill_containers
	fi
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	# Anything runc still knows (e.g. containerd died before it could kill them).
	if [ -d "$RUNC_ROOT" ] && command -v runc >/dev/null 2>&1; then
		local nsroot id
		for nsroot in "$RUNC_ROOT"/*/; do
			[ -d "$nsroot" ] || continue
			for id in $(runc --root "$nsroot" list -q 2>/dev/null); do
				runc --root "$nsroot" kill -a "$id" KILL >/dev/null 2>&1 || true
				runc --root "$nsroot" delete -f "$id" >/dev/null 2>&1 || true
				# containerd 1.6 puts a shim's socket at /run/containerd/s/sha256(<address>/<ns>/<id>);
				# a killed shim leaves it behind.
				rm -f "/run/containerd/s/$(printf '%s' "$SOCK/$(basename "$nsroot")/$id" | sha256sum | cut -d' ' -f1)"
			done
		done
	fi
	local shim
	for shim in $(pids_using_socket); do
		kill -KILL "$shim" 2>/dev/null || true
	done
	# Unmount whatever is left under the state dir, deepest first.
	local mnt
	while read -r mnt; do
		umount -l "$mnt" 2>/dev/null || umount -f "$mnt" 2>/dev/null || true
	done < <(awk -v d="$DIR" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
	# The CNI bridge of this instance.
	if command -v ip >/dev/null 2>&1 && ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
		ip link delete "$CNI_BRIDGE" 2>/dev/null || true
	fi
	rm -rf "$DIR" 2>/dev/null || {
		sleep 0.5
		rm -rf "$DIR"
	}
	log "stopped; removed $DIR"
}

# stop_daemon stops containerd and its shims, keeping the state dir (root, images, config).
stop_daemon() {
	local pid=""
	[ -f "$PIDFILE" ] && pid="$(cat "$PIDFILE" 2>/dev/null || true)"
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	local shim
	for shim in $(pids_using_socket); do
		kill -KILL "$shim" 2>/dev/null || true
	done
	rm -f "$PIDFILE" "$SOCK" "$SOCK.ttrpc"
}

# cmd_restart is what a reboot does to the runtime: every container gone, containerd started
# again; the images and the configuration stay.
cmd_restart() {
	if ! running; then
		log "containerd is not running under $DIR: run '$0 start' first"
		return 1
	fi
	kill_containers
	stop_daemon
	# A reboot empties the state dir (tmpfs on a real host): sandboxes' mounts and runc state go.
	local mnt
	while read -r mnt; do
		umount -l "$mnt" 2>/dev/null || true
	done < <(awk -v d="$DIR/state" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
	rm -rf "$DIR/state" "$RUNC_ROOT" "$DIR/cni/ipam"
	log "containerd stopped with every container removed; starting it again"
	cmd_start
}

case "${1:-}" in
install) cmd_install ;;
build) cmd_build ;;
built) cmd_built ;;
start) cmd_start ;;
restart) cmd_restart ;;
stop) cmd_stop ;;
env) env_lines ;;
*)
	echo "usage: $0 install|build|built|start|restart|stop|env" >&2
	exit 2
	;;
esac
