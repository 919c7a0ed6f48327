#!/usr/bin/env bash
# hack/kube-apiserver.sh: a private kube-apiserver v1.36.3 (with its own etcd) for nodekit's
# cluster-mode e2e tests.
#
#   hack/kube-apiserver.sh build     build kube-apiserver from hack/apiserver (its own Go module) into
#                                    the cache dir; skipped when the cached binary was built from the
#                                    same hack/apiserver/go.sum (about 16 minutes of 2 cores with an empty
#                                    GOCACHE; see NODEKIT_APISERVER_FAST_BUILD); then, beside it, the
#                                    upstream EndpointSlice controller alone (_endpointslice-controller,
#                                    same module: seconds on the build cache kube-apiserver left), and
#                                    the upstream node lifecycle controller (_nodelifecycle-controller,
#                                    the same way), and kube-scheduler v1.36.3 (_kube-scheduler: the
#                                    upstream command unchanged; the same way, about a minute on
#                                    that build cache); each has its own binary and stamp
#   hack/kube-apiserver.sh install   apt-get install etcd-server and openssl when missing (as root)
#   hack/kube-apiserver.sh start     start etcd and kube-apiserver on loopback ports, wait for /readyz,
#                                    write two kubeconfigs (admin, node) and <dir>/env, print it; start
#                                    the EndpointSlice controller (Services get EndpointSlices)
#   hack/kube-apiserver.sh stop      stop both and remove <dir>
#   hack/kube-apiserver.sh stop-apiserver   stop only kube-apiserver (etcd, certs, tokens and all
#                                    state stay): an API server outage for tests
#   hack/kube-apiserver.sh start-apiserver  start kube-apiserver again after stop-apiserver, on the
#                                    same port with the same etcd, certs and tokens; wait for /readyz
#   hack/kube-apiserver.sh env       print the env lines
#   hack/kube-apiserver.sh tidy      go mod tidy of hack/apiserver (the main packages sit in
#                                    _kube-apiserver/, _endpointslice-controller/,
#                                    _nodelifecycle-controller/ and _kube-scheduler/, which tidy
#                                    alone does not see)
#
# Environment:
#   NODEKIT_APISERVER_CACHE   binary cache dir (default /var/cache/nodekit/kube-apiserver-v1.36.3)
#   NODEKIT_APISERVER_DIR     state dir (default /tmp/nodekit-apiserver)
#   NODEKIT_NODE_NAME         the node identity to issue a token for (default nodekit-e2e)
#   NODEKIT_APISERVER_START_TIMEOUT  seconds to wait for /readyz (default 90)
#   NODEKIT_APISERVER_FAST_BUILD  1 = build for speed, not for a fast binary: -gcflags=all=-N -l
#                             (no optimisation, no inlining: Kubernetes' own DBG=1 build mode; measured
#                             here 26-56% less compiler CPU per package) and CGO_ENABLED=0 (as the
#                             release binaries are built; no C compiler runs). A cold build took 364s
#                             here against 895s without it (2 shared cores), and every API-server e2e
#                             test passes against it; .ci/run uses it. Default 0 (optimised binary).
#
# The API server runs with --authorization-mode=Node,RBAC and NodeRestriction admission, so the
# node kubeconfig (user system:node:<name>, group system:nodes) can only touch its own Node, its own
# Lease and the pods bound to it, as a real kubelet's credential. The env lines are:
#   NODEKIT_APISERVER_URL=https://127.0.0.1:<port>
#   NODEKIT_ADMIN_KUBECONFIG=<dir>/admin.kubeconfig
#   NODEKIT_NODE_KUBECONFIG=<dir>/node.kubeconfig
#   NODEKIT_NODE_NAME=<name>
#   NODEKIT_ENDPOINTSLICE_CONTROLLER=1   (the EndpointSlice controller runs)
#   NODEKIT_NODELIFECYCLE_CONTROLLER=<cache>/nodelifecycle-controller   (built; not started: a test
#                                        that wants Nodes going NotReady on lease expiry runs it with
#                                        its own --node-monitor-grace-period, for its own duration,
#                                        with --node-selector naming its own Nodes' label, so the
#                                        other tests' Nodes and pods are never touched; with
#                                        --taint-eviction it also evicts the pods of the Nodes it
#                                        taints)
#   NODEKIT_KUBE_SCHEDULER=<cache>/kube-scheduler   (built; not started: a test whose pods are to be
#                                        placed by the real scheduler runs it with the admin
#                                        kubeconfig, leader election off and --secure-port 0, for
#                                        its own duration, its pods' nodeSelector naming its own
#                                        Nodes)
#   NODEKIT_KUBELET_CLIENT_CA=<dir>/kubelet-client-ca.crt  (the agent's --client-ca-file)
#   NODEKIT_BOOTSTRAP_KUBECONFIG=<dir>/bootstrap.kubeconfig  (a bootstrap token, group
#                             system:bootstrappers: may create CSRs, as kubeadm's join token)
#   NODEKIT_NODE_CLIENT_CA=<dir>/node-client-ca.crt, NODEKIT_NODE_CLIENT_CA_KEY=<dir>/node-client-ca.key
#                             (the API server's --client-ca-file: a test signs node CSRs with it, as
#                             kube-controller-manager's signer would)
# Bootstrap tokens are on (--enable-bootstrap-token-auth); system:bootstrappers is bound to
# system:node-bootstrapper and system:nodes to the selfnodeclient CSR role, as kubeadm binds them.
# The API server reaches a node's HTTPS API (logs, exec, port-forward, node proxy) at the node's
# InternalIP only (run the agent with node IP 127.0.0.1), with a client certificate from that CA,
# and without --kubelet-certificate-authority: it does not verify the agent's serving certificate
# (the self-signed pair an agent makes without --tls-cert-file).
# Use them with: set -a; . <dir>/env; set +a
set -euo pipefail

VERSION="v1.36.3"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODDIR="$REPO/hack/apiserver"
CACHE="${NODEKIT_APISERVER_CACHE:-/var/cache/nodekit/kube-apiserver-$VERSION}"
BIN="$CACHE/kube-apiserver"
STAMP="$CACHE/go.sum.sha256"
# Beside it, programs of the same module (hack/apiserver/_<name>/main.go),
# each with its own binary and stamp (<bin>.sha256: go.sum and its main.go),
# so adding or changing one never invalidates the cached kube-apiserver:
# the EndpointSlice controller, the node lifecycle controller (with the
# taint eviction controller) and kube-scheduler.
AUX=(endpointslice-controller nodelifecycle-controller kube-scheduler)
ESC_BIN="$CACHE/endpointslice-controller"
NLC_BIN="$CACHE/nodelifecycle-controller"
KS_BIN="$CACHE/kube-scheduler"
DIR="${NODEKIT_APISERVER_DIR:-/tmp/nodekit-apiserver}"
NODE_NAME="${NODEKIT_NODE_NAME:-nodekit-e2e}"
START_TIMEOUT="${NODEKIT_APISERVER_START_TIMEOUT:-90}"

log() { echo "kube-apiserver.sh: $*" >&2; }

gosum_hash() { sha256sum "$MODDIR/go.sum" | cut -d' ' -f1; }

aux_hash() { cat "$MODDIR/go.sum" "$MODDIR/_$1/main.go" | sha256sum | cut -d' ' -f1; }

aux_built() { [ -x "$CACHE/$1" ] && [ -f "$CACHE/$1.sha256" ] && [ "$(cat "$CACHE/$1.sha256")" = "$(aux_hash "$1")" ]; }

cmd_build() {
	build_apiserver
	local name
	for name in "${AUX[@]}"; do
		build_aux "$name"
	done
}

# build_aux name: hack/apiserver/_<name> into $CACHE/<name>, with the
# flags kube-apiserver is built with, so it reuses its build cache
# (seconds to a minute each).
build_aux() {
	local bin="$CACHE/$1"
	if aux_built "$1"; then
		log "cached: $bin"
		return 0
	fi
	mkdir -p "$CACHE"
	local start=$SECONDS
	local flags=(-trimpath -ldflags='-s -w')
	if [ "${NODEKIT_APISERVER_FAST_BUILD:-0}" = 1 ]; then
		flags+=(-gcflags='all=-N -l')
		export CGO_ENABLED=0
	fi
	(cd "$MODDIR" && GOFLAGS=-mod=readonly go build "${flags[@]}" -o "$bin.tmp" "./_$1")
	mv -f "$bin.tmp" "$bin"
	aux_hash "$1" >"$bin.sha256"
	log "built $bin in $((SECONDS - start))s"
}

build_apiserver() {
	if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(gosum_hash)" ]; then
		log "cached: $BIN"
		return 0
	fi
	mkdir -p "$CACHE"
	log "building kube-apiserver $VERSION into $BIN (takes minutes on a fresh machine)"
	local start=$SECONDS
	local flags=(-trimpath -ldflags='-s -w')
	if [ "${NODEKIT_APISERVER_FAST_BUILD:-0}" = 1 ]; then
		flags+=(-gcflags='all=-N -l')
		export CGO_ENABLED=0
		log "fast build: -gcflags='all=-N -l', CGO_ENABLED=0"
	fi
	# go build runs GOMAXPROCS compiles at once (both cores on CI); no nice, so
	# a CI build does not lose its cores to whatever else runs.
	(cd "$MODDIR" && GOFLAGS=-mod=readonly go build "${flags[@]}" -o "$BIN.tmp" ./_kube-apiserver)
	mv -f "$BIN.tmp" "$BIN"
	gosum_hash >"$STAMP"
	log "built $BIN in $((SECONDS - start))s"
}

# built: exit 0 when the cached binaries are there and current (no build needed).
cmd_built() {
	[ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(gosum_hash)" ] || return 1
	local name
	for name in "${AUX[@]}"; do
		aux_built "$name" || return 1
	done
}

cmd_tidy() {
	(
		cd "$MODDIR"
		trap 'rm -f "$MODDIR/zz_tidy_main.go" "$MODDIR/zz_tidy_esc.go" "$MODDIR/zz_tidy_nlc.go" "$MODDIR/zz_tidy_ks.go"' EXIT
		cp _kube-apiserver/main.go zz_tidy_main.go
		# The controllers' imports too (their mains renamed: one package
		# main).
		sed 's/^func main() {/func escMain() {/' _endpointslice-controller/main.go >zz_tidy_esc.go
		sed 's/^func main() {/func nlcMain() {/' _nodelifecycle-controller/main.go >zz_tidy_nlc.go
		sed 's/^func main() {/func ksMain() {/' _kube-scheduler/main.go >zz_tidy_ks.go
		GOFLAGS=-mod=mod go mod tidy
	)
}

cmd_install() {
	local need=()
	command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
	command -v openssl >/dev/null 2>&1 || need+=(openssl)
	if [ "${#need[@]}" -eq 0 ]; then
		log "etcd and openssl are installed"
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
	# Debian's package may start a system etcd on 2379; ours uses its own ports and data dir.
}

# free_port prints a loopback TCP port nobody listens on.
free_port() {
	local p used
	used="$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://')"
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 20000))
		if ! grep -qx "$p" <<<"$used" && ! grep -qx "$p" <<<"${TAKEN:-}"; then
			TAKEN="${TAKEN:-}"$'\n'"$p"
			echo "$p"
			return 0
		fi
	done
	log "no free port"
	return 1
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

env_lines() { cat "$DIR/env"; }

kubeconfig() { # file user token server
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nodekit
  cluster:
    server: $4
    certificate-authority: $DIR/certs/apiserver.crt
users:
- name: $2
  user:
    token: $3
contexts:
- name: nodekit
  context:
    cluster: nodekit
    user: $2
current-context: nodekit
EOF
}

cmd_start() {
	if alive "$DIR/kube-apiserver.pid" && [ -f "$DIR/env" ]; then
		log "already running"
		env_lines
		return 0
	fi
	[ -x "$BIN" ] || { log "no binary at $BIN: run '$0 build' first"; return 1; }
	command -v etcd >/dev/null 2>&1 || { log "no etcd: run '$0 install' first"; return 1; }
	cmd_stop_quiet
	mkdir -p "$DIR/etcd" "$DIR/certs"
	chmod 700 "$DIR"

	local etcd_port peer_port api_port
	etcd_port="$(free_port)"
	peer_port="$(free_port)"
	api_port="$(free_port)"

	# Service-account signing key pair.
	openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
	openssl rsa -in "$DIR/sa.key" -pubout -out "$DIR/sa.pub" 2>/dev/null

	# Static tokens: token,user,uid,"groups".
	local admin_token node_token
	admin_token="$(openssl rand -hex 24)"
	node_token="$(openssl rand -hex 24)"
	cat >"$DIR/tokens.csv" <<EOF
$admin_token,nodekit-admin,nodekit-admin,"system:masters"
$node_token,system:node:$NODE_NAME,system:node:$NODE_NAME,"system:nodes"
EOF
	chmod 600 "$DIR/tokens.csv" "$DIR/sa.key"
	kubelet_client_pair
	node_client_ca

	etcd --name nodekit --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "nodekit=http://127.0.0.1:$peer_port" --initial-cluster-state new \
		>"$DIR/etcd.log" 2>&1 &
	echo $! >"$DIR/etcd.pid"

	local deadline=$((SECONDS + START_TIMEOUT))
	until curl -fsS "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"'; do
		if ! alive "$DIR/etcd.pid" || [ $SECONDS -ge $deadline ]; then
			log "etcd did not come up; last log lines:"
			tail -20 "$DIR/etcd.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done

	cat >"$DIR/ports" <<EOF
ETCD_PORT=$etcd_port
API_PORT=$api_port
ADMIN_TOKEN=$admin_token
EOF
	chmod 600 "$DIR/ports"
	launch_apiserver "$etcd_port" "$api_port" "$admin_token" "$deadline" || return 1
	local url="https://127.0.0.1:$api_port"

	# Without a controller manager nobody creates the default service account; the
	# ServiceAccount admission plugin needs it to admit pods in "default".
	curl -ksS -o /dev/null -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
		-X POST "$url/api/v1/namespaces/default/serviceaccounts" \
		-d '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}' || true

	kubeconfig "$DIR/admin.kubeconfig" nodekit-admin "$admin_token" "$url"
	kubeconfig "$DIR/node.kubeconfig" "system:node:$NODE_NAME" "$node_token" "$url"
	chmod 600 "$DIR/admin.kubeconfig" "$DIR/node.kubeconfig"
	bootstrap_token "$url" "$admin_token" || return 1
	cat >"$DIR/env" <<EOF
NODEKIT_APISERVER_URL=$url
NODEKIT_ADMIN_KUBECONFIG=$DIR/admin.kubeconfig
NODEKIT_NODE_KUBECONFIG=$DIR/node.kubeconfig
NODEKIT_NODE_NAME=$NODE_NAME
NODEKIT_KUBELET_CLIENT_CA=$DIR/kubelet-client-ca.crt
NODEKIT_BOOTSTRAP_KUBECONFIG=$DIR/bootstrap.kubeconfig
NODEKIT_NODE_CLIENT_CA=$DIR/node-client-ca.crt
NODEKIT_NODE_CLIENT_CA_KEY=$DIR/node-client-ca.key
EOF
	# The EndpointSlice controller, as kube-controller-manager runs it, with
	# the admin identity.
	if [ -x "$ESC_BIN" ]; then
		launch_esc
		echo "NODEKIT_ENDPOINTSLICE_CONTROLLER=1" >>"$DIR/env"
	else
		log "no EndpointSlice controller at $ESC_BIN ('$0 build' builds it): Services get no EndpointSlices"
	fi
	if [ -x "$NLC_BIN" ]; then
		echo "NODEKIT_NODELIFECYCLE_CONTROLLER=$NLC_BIN" >>"$DIR/env"
	else
		log "no node lifecycle controller at $NLC_BIN ('$0 build' builds it): tests can't check NotReady on lease expiry"
	fi
	if [ -x "$KS_BIN" ]; then
		echo "NODEKIT_KUBE_SCHEDULER=$KS_BIN" >>"$DIR/env"
	else
		log "no kube-scheduler at $KS_BIN ('$0 build' builds it): tests of scheduler-placed pods skip"
	fi
	log "ready at $url"
	env_lines
}

# kubelet_client_pair: a CA the agent is given as --client-ca-file and the certificate the API
# server presents to the agent's HTTPS API with it (--kubelet-client-certificate/-key; user
# kube-apiserver-kubelet-client in system:masters), as kubeadm makes them.
kubelet_client_pair() {
	local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	openssl req -x509 "${ec[@]}" -keyout "$DIR/kubelet-client-ca.key" -out "$DIR/kubelet-client-ca.crt" \
		-subj "/CN=nodekit-kubelet-client-ca" -days 7 2>/dev/null
	openssl req "${ec[@]}" -keyout "$DIR/kubelet-client.key" -out "$DIR/kubelet-client.csr" \
		-subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
	printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' >"$DIR/kubelet-client.ext"
	openssl x509 -req -in "$DIR/kubelet-client.csr" -CA "$DIR/kubelet-client-ca.crt" \
		-CAkey "$DIR/kubelet-client-ca.key" -CAcreateserial -out "$DIR/kubelet-client.crt" -days 7 \
		-extfile "$DIR/kubelet-client.ext" 2>/dev/null
	chmod 600 "$DIR/kubelet-client-ca.key" "$DIR/kubelet-client.key"
}

# node_client_ca: the CA of the API server's --client-ca-file, whose key a test uses to sign
# node CSRs as kube-controller-manager's kubernetes.io/kube-apiserver-client-kubelet signer would.
node_client_ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$DIR/node-client-ca.key" -out "$DIR/node-client-ca.crt" \
		-subj "/CN=nodekit-node-client-ca" -days 7 2>/dev/null
	chmod 600 "$DIR/node-client-ca.key"
}

# api_post url admin_token path json: POST an object; 409 (it exists) is fine.
api_post() {
	local code
	code="$(curl -ksS -o "$DIR/post.out" -w '%{http_code}' -H "Authorization: Bearer $2" \
		-H 'Content-Type: application/json' -X POST "$1$3" -d "$4" 2>/dev/null)" || true
	case "$code" in 201 | 409) return 0 ;; esac
	return 1
}

# crb url admin_token name role group: a ClusterRoleBinding of a group to a ClusterRole.
crb() {
	api_post "$1" "$2" /apis/rbac.authorization.k8s.io/v1/clusterrolebindings \
		'{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"'"$3"'"},
		  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"'"$4"'"},
		  "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"'"$5"'"}]}' ||
		{ log "could not bind $5 to $4: $(cat "$DIR/post.out")"; return 1; }
}

# bootstrap_token url admin_token: a bootstrap token Secret in kube-system (retried until the
# API server has made kube-system), the RBAC bindings kubeadm makes for TLS bootstrap and client
# certificate rotation, and <dir>/bootstrap.kubeconfig with the token.
bootstrap_token() {
	local url="$1" admin="$2" id secret body
	id="$(openssl rand -hex 3)"
	secret="$(openssl rand -hex 8)"
	body='{"apiVersion":"v1","kind":"Secret","type":"bootstrap.kubernetes.io/token",
	  "metadata":{"name":"bootstrap-token-'"$id"'","namespace":"kube-system"},
	  "stringData":{"token-id":"'"$id"'","token-secret":"'"$secret"'",
	    "usage-bootstrap-authentication":"true","usage-bootstrap-signing":"true"}}'
	local deadline=$((SECONDS + 30))
	until api_post "$url" "$admin" /api/v1/namespaces/kube-system/secrets "$body"; do
		if [ $SECONDS -ge $deadline ]; then
			log "could not create the bootstrap token secret: $(cat "$DIR/post.out")"
			return 1
		fi
		sleep 0.5
	done
	crb "$url" "$admin" nodekit:kubelet-bootstrap system:node-bootstrapper system:bootstrappers || return 1
	crb "$url" "$admin" nodekit:node-autoapprove-certificate-rotation \
		system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes || return 1
	rm -f "$DIR/post.out"
	kubeconfig "$DIR/bootstrap.kubeconfig" kubelet-bootstrap "$id.$secret" "$url"
	chmod 600 "$DIR/bootstrap.kubeconfig"
}

# launch_apiserver etcd_port api_port admin_token deadline: start kube-apiserver on the state
# in $DIR (its log is appended to) and wait for /readyz.
launch_apiserver() {
	local etcd_port="$1" api_port="$2" admin_token="$3" deadline="$4"
	"$BIN" \
		--etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
		--cert-dir "$DIR/certs" \
		--service-account-key-file "$DIR/sa.pub" \
		--service-account-signing-key-file "$DIR/sa.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--token-auth-file "$DIR/tokens.csv" \
		--enable-bootstrap-token-auth \
		--client-ca-file "$DIR/node-client-ca.crt" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--service-cluster-ip-range 10.96.0.0/24 \
		--allow-privileged=true \
		--kubelet-client-certificate "$DIR/kubelet-client.crt" \
		--kubelet-client-key "$DIR/kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		>>"$DIR/kube-apiserver.log" 2>&1 &
	echo $! >"$DIR/kube-apiserver.pid"

	local url="https://127.0.0.1:$api_port"
	until [ "$(curl -ksS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin_token" "$url/readyz" 2>/dev/null)" = 200 ]; do
		if ! alive "$DIR/kube-apiserver.pid" || [ $SECONDS -ge $deadline ]; then
			log "kube-apiserver did not become ready within ${START_TIMEOUT}s; last log lines:"
			tail -30 "$DIR/kube-apiserver.log" >&2 || true
			return 1
		fi
		sleep 0.5
	done
}

cmd_stop_apiserver() {
	[ -f "$DIR/ports" ] || { log "not started (no $DIR/ports)"; return 1; }
	stop_pid "$DIR/kube-apiserver.pid"
	log "kube-apiserver stopped (etcd and state kept; '$0 start-apiserver' brings it back)"
}

cmd_start_apiserver() {
	[ -f "$DIR/ports" ] || { log "not started (no $DIR/ports): use '$0 start'"; return 1; }
	if alive "$DIR/kube-apiserver.pid"; then
		log "kube-apiserver is running"
		return 0
	fi
	alive "$DIR/etcd.pid" || { log "etcd is not running: use '$0 start'"; return 1; }
	local ETCD_PORT API_PORT ADMIN_TOKEN
	# shellcheck disable=SC1091
	. "$DIR/ports"
	launch_apiserver "$ETCD_PORT" "$API_PORT" "$ADMIN_TOKEN" $((SECONDS + START_TIMEOUT)) || return 1
	# The EndpointSlice controller starts afresh, as it would with a
	# restarted control plane: its watches, refused while the API server
	# was down, would otherwise come back only after client-go's back-off
	# (up to 30 s, with jitter), and a test creating a Service meanwhile saw
	# its slice stay empty.
	if [ -f "$DIR/endpointslice-controller.pid" ]; then
		stop_pid "$DIR/endpointslice-controller.pid"
		launch_esc
	fi
	log "kube-apiserver ready again at https://127.0.0.1:$API_PORT"
}

# launch_esc starts the EndpointSlice controller in the background.
launch_esc() {
	"$ESC_BIN" --kubeconfig "$DIR/admin.kubeconfig" >>"$DIR/endpointslice-controller.log" 2>&1 &
	echo $! >"$DIR/endpointslice-controller.pid"
}

stop_pid() { # pidfile
	local pid
	[ -f "$1" ] || return 0
	pid="$(cat "$1")"
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

cmd_stop_quiet() {
	[ -d "$DIR" ] || return 0
	stop_pid "$DIR/endpointslice-controller.pid"
	stop_pid "$DIR/kube-apiserver.pid"
	stop_pid "$DIR/etcd.pid"
	rm -rf "$DIR"
}

cmd_stop() {
	cmd_stop_quiet
	log "stopped"
}

cmd_env() {
	[ -f "$DIR/env" ] || { log "not started"; return 1; }
	env_lines
}

case "${1:-}" in
build) cmd_build ;;
built) cmd_built ;;
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
stop-apiserver) cmd_stop_apiserver ;;
start-apiserver) cmd_start_apiserver ;;
env) cmd_env ;;
tidy) cmd_tidy ;;
*)
	echo "usage: $0 build|built|install|start|stop|stop-apiserver|start-apiserver|env|tidy" >&2
	exit 2
	;;
esac
