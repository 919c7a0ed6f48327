// Package clusterapiserver joins a nodekit Agent to a Kubernetes API server
// through client-go (the root package stays free of client-go). Wire adds
// to a Builder:
//
//   - the pod source "api": the pods bound to the node (podconfig/apiserver);
//   - the pod status sink: status patches, static pods reported on their
//     mirror pods, finished pods deleted (podstatus/apiserver.PodStatusSink);
//   - node registration and status (nodestatus.Controller with the default
//     setters; Ready follows the runtime's readiness and the PLEG's health);
//   - the node lease (nodestatus/apiserver.LeaseController);
//   - mirror pods for the static pods (podstatus/apiserver.MirrorClient),
//     kept as they are across agent restarts: a mirror whose static pod
//     is not listed yet is deleted only once every pod source is ready;
//   - the node's IPs for the pods (Cluster.NodeIPs): every pod's
//     status.hostIP(s), the pod IPs of host-network pods and the env
//     fieldRefs status.hostIP(s) take the addresses of the Node as last
//     stored, as the kubelet reads its Node;
//   - the agent's events written to the API server (events/apiserver: the
//     kubelet's aggregation and spam filter, a bounded queue that drops,
//     never blocks; Config.NoEvents turns it off).
//
// The kubelet version reported is Config.AgentVersion, by default
// nodestatus.DefaultAgentVersion (v1.36.3+nodekit); it must be a semantic
// version.
//
// The client should carry the node's own credential (system:node:<name>).
//
//	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithManifestDir(dir)
//	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: name}).Build()
package clusterapiserver
