// Package cmwire wires the cgroup container manager (package containermgr)
// and its CPU and memory managers into a nodekit Agent with one call each,
// the way agentserver.Wire adds the HTTPS API. They live here, not in the
// root package, so that an agent that does not call them (one on the fake
// runtime, say) does not link the cgroup library, D-Bus and go-systemd:
//
//	b := nodekit.NewBuilder().WithNodeName("node1").WithRuntimeEndpoint(ep).WithRootDir(root)
//	cmwire.ContainerManager(b, cm) // *containermgr.Manager
//	cmwire.CPUManager(b, cpus)     // *cpumanager.Manager
//	cmwire.MemoryManager(b, mem)   // *memorymanager.Manager
//	agent, err := b.Build()
//
// Each returns the Builder, and Build reports a nil manager or a second
// call with the Builder's other problems. The order of the calls does not
// matter: Build runs the wirings' hooks (nodekit.Wiring, given to
// Builder.WithWiring) in one fixed order. With ContainerManager,
// Builder.WithEviction and Builder.WithStats read their cgroup stats from
// the manager's cgroups (nodekit.PodCgroups).
//
// Before the manager starts, the agent asks the runtime for its cgroup
// driver (CRI RuntimeConfig, containerd 2.x) and makes the manager use it,
// with a warning when it differs from the configured one, as the kubelet
// does since 1.28; a runtime that does not answer (containerd 1.6) leaves
// the configured driver.
package cmwire
