// Package agentshutdown wires the graceful node shutdown (package
// nodeshutdown) into a nodekit Agent with one call, the way agentserver
// and clusterapiserver do, so an agent that does not call it does not link
// it (and one that does not add nodeshutdown/systemd's watcher does not
// link D-Bus):
//
//	b := nodekit.NewBuilder().WithNodeName("node1").WithRuntimeEndpoint(ep).WithRootDir(root)
//	sd := agentshutdown.Wire(b, agentshutdown.Config{
//		Shutdown: nodeshutdown.Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second},
//		// On a systemd machine, logind's delay inhibitor starts it:
//		Watchers: []agentshutdown.Watcher{systemd.Watcher(systemd.Config{})},
//	})
//	agent, err := b.Build()
//	go agent.Run(ctx)
//	...
//	err = sd.Shutdown(ctx) // firmware without logind: before powering off
//
// The agent's admission then refuses new pods during the shutdown, its
// node status (clusterapiserver.Wire) reports Ready False "node is shutting
// down" at once, and the pods are killed through the pod workers, in the
// kubelet's groups and budgets, with the kubelet's Failed/Terminated
// status and DisruptionTarget condition.
package agentshutdown
