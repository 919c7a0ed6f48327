// Package nodestatus keeps a node object up to date the way the kubelet
// does: Setters fill the status, a Controller registers the node with a
// NodeSink and sends the status when it changes or the report period is up.
//
// # Setters
//
// DefaultSetters returns them in the kubelet's order: NodeAddress,
// MachineInfo (capacity and allocatable: cpu, memory, pods, ephemeral-storage,
// hugepages-<size>; allocatable = capacity − reservation), VersionInfo
// ("<runtime>://<version>", kernel, OS image), DaemonEndpoints, Images
// (largest 50, 5 names each), GoRuntime, the MemoryPressure, DiskPressure and
// PIDPressure conditions from a PressureSource, Ready (last of the
// conditions: False with KubeletNotReady while a check fails or cpu, memory
// or pods capacity is missing, and ephemeral-storage with
// RequireEphemeralStorage) and VolumesInUse. Condition heartbeats move on
// every update; transition times only when a status flips.
//
// # Controller
//
// Run registers the node (back-off 100ms doubling to 7s), then computes the
// status every 100ms until the node is Ready (at most 120s) and every 10s
// after that. SyncOnce is one update: up to 5 tries, the first on the sink's
// cached node and the others on a fresh read. A try sends the status only if
// it changed in more than heartbeats (StatusChanged) or the report period
// (5m) is up; after each change the period moves by a random delay of up to
// ±2.5m (ReportDelay) so that nodes spread out.
//
// While the sink is unreachable each update fails after its tries and the
// next one computes the status afresh: nothing queues up, and the first
// update that gets through sends the latest status once. Clock jumps (a
// device booting in 1970 until NTP sets the time) neither stall nor speed
// up the controller: a last report in the future makes a report due at
// once, and the fast-update phase is counted in time waited, not by the
// wall clock.
//
// # Sinks
//
// nodestatus/apiserver is the NodeSink for a Kubernetes API server (and
// holds the node lease); Local keeps the node in memory and writes it to a
// checkpoint file or a callback, for agents without a cluster.
//
//	machine := nodestatus.MachineReader{}.Read
//	sink, _ := nodestatus.NewLocal(nodestatus.LocalConfig{Dir: "/var/lib/agent"})
//	ctrl, _ := nodestatus.New(nodestatus.Config{
//		NodeName: "edge-1",
//		Sink:     sink,
//		Setters: nodestatus.DefaultSetters(nodestatus.SettersConfig{
//			Machine:     nodestatus.MachineInfoConfig{Machine: machine, Reservation: cm.Reservation},
//			Runtime:     cri,
//			Images:      cri,
//			Pressure:    evictionManager,
//			ReadyChecks: []func() error{nodestatus.RuntimeReadyCheck(loop.RuntimeReady)},
//		}),
//	})
//	go ctrl.Run(ctx)
package nodestatus
