// Package nodekit wires nodekit's parts into a running node agent: a Builder
// collects the settings, Build constructs every part (validating each one's
// configuration, reporting every problem at once) and the Agent it returns
// runs them.
//
//	agent, err := nodekit.NewBuilder().
//		WithNodeName("edge-1").
//		WithRuntimeEndpoint("unix:///run/containerd/containerd.sock"). // or WithFakeRuntime(images...)
//		WithManifestDir("/etc/nodekit/manifests").
//		WithRootDir("/var/lib/nodekit").
//		WithLogger(log).
//		Build()
//	if err != nil { ... }        // errors.Join of every bad setting, each naming its part and field
//	go agent.Run(ctx)           // until ctx ends or a part fails
//	<-agent.Ready()             // the sync loop runs
//	status, ok := agent.StatusManager().GetPodStatus(uid)
//
// The data flows as in the kubelet:
//
//	pod sources ─► podconfig ─► syncloop ◄─ pleg events ◄─ relist ◄─ CRI
//	                               │
//	            pod workers ─► runtime engine (kuberuntime.Manager) ─► CRI
//	            status manager ─► StatusSink
//
// The subsystem packages do not import each other; this package is the only
// place that knows all of them. It holds wiring only: converting podconfig's
// updates and pleg's events into the sync loop's types, starting the parts in
// dependency order (runtime connection, podconfig and its sources, pleg, the
// sync loop) and stopping them in reverse order.
//
// Optional parts that an agent on the fake runtime does not need are wired
// by packages of their own that import this one, so a program that does
// not call them does not link them (this package imports none of them):
//
//	cmwire.ContainerManager(b, cm)   // containermgr/cmwire: cgroups; also CPUManager, MemoryManager
//	containerdwire.Events(b, "", nil) // containerd's task events
//	agentserver.Wire(b, cfg)          // the kubelet's HTTPS API
//	clusterapiserver.Wire(b, cfg)     // join a cluster's API server
//
// Each adds its hooks through the Builder's generic ones: WithWiring (a
// Wiring's hooks run in one fixed order, its Rank, whatever the order of
// the calls), WithAgentPart, WithPart, WithPodTerminated,
// WithAdmitHandler, WithRuntimeConfig and WithSyncLoopConfig. A new
// optional part follows them; the root declares what it reads of a part as
// a small interface (PodCgroups, DeviceManager).
//
// Events: every part records the kubelet's events (image pulls, container
// starts, back-offs, probe failures, rejections, evictions, node conditions)
// through one kubetypes.EventRecorder, the logger's (package events) plus
// each WithEventRecorder; clusterapiserver.Wire adds the API server's
// (events/apiserver). Recording never blocks a part.
//
// The stats the kubelet serves on /stats/summary and /metrics/resource come
// from a stats.Provider wired to the agent's runtime, its pods, the container
// manager's cgroups (when cmwire.ContainerManager is used) and its root
// directory, made by Build:
//
//	var summary *stats.Provider
//	b.WithStats(stats.Config{}, &summary) // after Build: summary.Summary(ctx, onlyCPUAndMemory)
//	reg.MustRegister(stats.NewResourceCollector(summary, stats.CollectorConfig{Context: ctx}))
//
// Stopping the agent does not stop the pods: containers keep running, and an
// agent started again with the same root directory and sources takes them
// over without restarting them (the runtime's labels say which pod each
// container belongs to and which spec it was created from).
package nodekit
