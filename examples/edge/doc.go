// Command edge is a node agent for an appliance that is joined to a
// Kubernetes cluster but must keep working without it: it runs the pods the
// API server binds to it, and when the API server is unreachable (a WAN
// link down, the appliance rebooted in the field) it runs them from what it
// stored on disk, then catches up without restarting anything when the API
// server is back.
//
// # Usage
//
//	go run ./examples/edge --kubeconfig node.kubeconfig --node-name shop-17 --state-dir /var/lib/nodekit-edge
//	go run ./examples/edge --server https://10.0.0.1:6443 --token $TOKEN --ca ca.crt --node-name shop-17 \
//	    --runtime-endpoint unix:///run/containerd/containerd.sock --state-dir /var/lib/nodekit-edge
//
// Flags: --kubeconfig (one cluster, one token user) or --server/--token/--ca;
// --node-name (required); --runtime-endpoint (a CRI socket; empty runs the
// in-memory fake runtime, whose pods die with the process);
// --state-dir (default /var/lib/nodekit-edge; must survive reboots);
// --replay-after (default 2s: how long the API server gets at start before
// the stored pods are started); --status-every (default 10s); --duration; -v
// (info logs); -q (no pod table). The credential should be the node's own
// (user system:node:<name>, group system:nodes): the Node authorizer then
// lets it read exactly the pods, secrets and configMaps of this node.
//
// # What it does
//
//   - Pods: the API server's pod list for the node (list and watch) goes
//     through podconfig/checkpoint, which writes every set to disk before
//     the agent acts on it. At start, if the API server has not answered
//     within --replay-after, the stored set is started. When the API server
//     answers, its set replaces the stored one: pods whose spec did not
//     change keep running (same containers), pods deleted or changed
//     meanwhile are stopped or updated as the API server now says.
//   - ConfigMaps and secrets that pods use (volumes, projected volumes, env,
//     envFrom) are read through volumemgr/apiserver.Persisted: every object
//     read from the API server is stored on disk; when the API server cannot
//     answer, the stored copy is used; an object the API server says is gone
//     is removed; every minute the copies are refreshed and those no pod uses
//     any more are removed. Service account tokens of projected volumes
//     (the default kube-api-access-* volume) are kept the same way.
//   - Node status and lease: the status is computed every --status-every
//     and sent when the API server answers (only the latest, never a
//     backlog); the lease is renewed every 10s and, after a failure, retried
//     with a back-off of at most 7s, so it is renewed within seconds of the
//     API server's return.
//   - Pod status: the latest status of each pod is kept in memory and sent
//     when the API server answers again (one patch per pod, the latest).
//   - Clock jumps (an appliance booting in 1970 until NTP runs): the replay
//     delay runs on monotonic timers, stored data has no expiry by wall
//     clock, and the crash-loop and image-pull back-offs never wait longer
//     than their maximum (5 minutes) whatever the clock does.
//
// # What is stored on disk, and where
//
// Everything lives under --state-dir (call it S):
//
//	S/checkpoints/podconfig-api.json   the node's pod set as the API server last sent it
//	                                   (a v1 PodList: the full pod objects, spec and status)
//	S/checkpoints/podconfig-api.json.prev  the set before that: replayed if the latest is corrupt
//	S/objects/configmaps/<ns>_<name>   each configMap a pod uses (the v1 ConfigMap object)
//	S/objects/secrets/<ns>_<name>      each secret a pod uses (the v1 Secret object, its
//	                                   data NOT encrypted: protect S like the node's
//	                                   credential; use disk encryption on the appliance)
//	S/objects/tokens/t-<sha256>        the last service account token of each pod, service
//	                                   account and audience (a bearer credential: same care)
//	S/pods/<uid>/...                   the pods' volumes (secret volumes on tmpfs when
//	                                   running as root on a real runtime) as the kubelet
//	                                   keeps them under /var/lib/kubelet/pods
//	S/pod-logs/...                     container logs (CRI runtimes)
//
// Names too long for one path segment are stored as h-<sha256 of
// "<ns>/<name>">. The checkpoint and object files have a 16-byte header
// (magic "NKC\x01", payload length, CRC-32C) in front of JSON; they are
// written to a temporary file that is synced and renamed over the old one,
// then the directory is synced, so a crash or power loss leaves the old or
// the new file, never a torn one. Directories are created with mode 0700 and
// files with 0600 (the secrets directory is tightened to 0700 if it
// exists with a wider mode). A file that fails its checksum or does not
// decode is renamed to <file>.corrupt (then .corrupt.1, ...; never
// overwritten), a warning says so, and the agent starts with the rest: a
// corrupt pod set falls back to the previous one (one update older; a
// warning says so), and with neither usable no stored pod starts (the API
// server's set is used when it answers); a corrupt object is fetched again from the API server when
// it answers. The stored service account token is served offline whatever its
// expiry (the pod cannot reach the API server anyway); a fresh one replaces
// it when the volume is refreshed with the API server back.
//
// Like examples/cluster it serves the kubelet's HTTPS API on --port (10250)
// and /healthz on 127.0.0.1:--healthz-port (10248), with the kubelet's
// flags (--client-ca-file, --authentication-token-webhook,
// --authorization-mode, --anonymous-auth, --tls-cert-file,
// --tls-private-key-file); requests are authenticated and authorized by
// the API server, so while it is unreachable only client certificates
// authenticate and nothing is authorized (use --authorization-mode
// AlwaysAllow with a client CA for local access during an outage).
//
// As examples/cluster it takes the kubelet's certificate flags:
// --bootstrap-kubeconfig, --cert-dir (default <state-dir>/pki),
// --rotate-certificates, --rotate-server-certificates. The TLS bootstrap
// waits for the API server only when there is no valid client certificate
// in the cert dir; an agent that has one starts offline.
package main
