// Package kubetypes is the vocabulary nodekit's parts share, declared once.
// It is a leaf: it imports only k8s.io/api, apimachinery and cri-api, and
// every other nodekit package may import it. It holds values and pure
// predicates, never behaviour that needs a clock, a logger or I/O.
//
// What is here, and who speaks it:
//
//   - Pod updates: Op (SET, ADD, UPDATE, REMOVE, DELETE, RECONCILE), PodUpdate
//     and the source names (SourceFile, SourceHTTP, SourcePush, SourceAPI,
//     SourceAll). Pod sources send them, podconfig merges them, the sync loop
//     reads them.
//   - The pod annotations the agent sets and reads (ConfigSourceAnnotation,
//     ConfigSeenAnnotation, ConfigMirrorAnnotation, ConfigHashAnnotation) and
//     the predicates built on them: IsStaticPod, IsMirrorPod, IsCriticalPod.
//   - Pod lifecycle events (PodLifecycleEvent, EventType: ContainerStarted,
//     ContainerDied, ...): the PLEG sends them, the sync loop reacts.
//   - The runtime's view of a pod: Pod and Container (what a listing
//     returns), PodStatus and ContainerStatus (every instance, newest first),
//     ContainerState. The runtime engine (kuberuntime) produces them; the
//     PLEG caches them; the pod workers and the status manager read them.
//   - What a sync did: SyncResult and its StepResults (Action), and the two
//     back-off errors (ErrCrashLoopBackOff, ErrImagePullBackOff) that make a
//     failed step a wait rather than a failure; GCPolicy for container GC.
//   - ProbeResult, the prober's answer the engine reads for liveness and
//     startup; PressureSource, the eviction manager's answer node status reads.
//   - EventRecorder, what every part records Kubernetes events through (the
//     method set of client-go's recorder; package events and events/apiserver
//     implement it), the kubelet's event reasons (Reason*), and the objects
//     events are about: PodRef, ContainerRef (field path
//     spec.containers{name}), NodeRef; NopRecorder for a nil one.
//
// A program that only wires parts together rarely names these types; a
// program that implements a part (its own pod source, PLEG or runtime
// engine) speaks them.
//
//	update := kubetypes.PodUpdate{Op: kubetypes.SET, Source: "appliance", Pods: pods}
//	for _, p := range update.Pods {
//		if kubetypes.IsStaticPod(p) { ... }
//	}
package kubetypes
