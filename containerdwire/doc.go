// Package containerdwire makes a nodekit Agent follow containerd's own
// task events (package kuberuntime/containerdevents) with one call, the
// way agentserver.Wire adds the HTTPS API; it is not in the root package,
// so an agent that does not call it does not link the watcher:
//
//	b := nodekit.NewBuilder().WithNodeName("node1").WithRuntimeEndpoint(ep).WithRootDir(root)
//	var w *containerdevents.Watcher // optional: its Stats
//	containerdwire.Events(b, "", &w) // "": the runtime's endpoint
//	agent, err := b.Build()
//
// A container's exit then reaches the pod's status within milliseconds
// instead of at the next relist. Handler is the PLEG handler it wires, for
// agents that run a containerdevents.Watcher themselves.
package containerdwire
