// Package pleg is the pod lifecycle event generator: it watches the
// container runtime and tells the rest of the agent when a pod's containers
// start, die or disappear, and keeps a Cache of every pod's runtime status
// that pod workers read (and wait on) instead of asking the runtime.
//
// # Generic relisting
//
// A GenericPLEG lists every pod with Runtime.GetPods(ctx, true) once a
// RelistPeriod (1s) and compares each container and sandbox with the
// previous listing. "created" and "unknown" count as one state, and a
// container missing from a listing is "non-existent":
//
//	→ running       ContainerStarted
//	→ exited        ContainerDied
//	→ created/unknown  nothing (ContainerChanged exists but is never sent)
//	→ non-existent  ContainerRemoved if it was exited, else ContainerDied and ContainerRemoved
//
// Event.Data is the container's (or sandbox's) CRI id; Event.Sandbox says which. For every pod that
// has events, or was flagged with RequestReinspect, the PLEG reads the pod's
// status (Runtime.GetPodStatus) into the Cache and then sends the events
// (a PodSync if there were none). If the status cannot be read the error is
// cached, the pod is flagged again and no event is sent: the next relist sees
// the same changes. A pod that no longer lists is deleted from the Cache. A
// status without IPs and without a ready sandbox keeps the cached IPs, so a
// finished pod still reports the IP it had. Events are sent without blocking:
// if the Watch channel (capacity 1000) is full they are dropped and counted.
// After each relist the Cache's global time moves to the relist's start,
// which releases GetNewerThan waiters of unchanged pods.
//
// Healthy is false until a relist succeeds and when the last one started
// more than RelistThreshold (3m) ago. RequestRelist queues an on-demand relist
// of a single pod (RelistPod), which Run serves unless a global relist
// started after the request. A relist that changes nothing allocates nothing.
//
// # Pods their worker is changing
//
// A pod worker that changes a pod in the runtime brackets the change with
// HoldPod and ReleasePod, then reads the pod and hands the read to
// ObservePodStatus (stamped with when the read began). Global relists leave a
// held pod out: what they would read is about to change, and the worker
// reads it right after. The handed-over status is relisted as RelistPod
// would relist its own read (events, cache, exits from runtime events
// applied), unless a global relist or a newer read of the pod began after
// it. One read per change instead of the worker's, the relist's and an
// on-demand one. A worker that waits on GetNewerThan must then wait for a
// time taken after ReleasePod: every relist that left its pod out began
// before that, so the Cache's global time from such a relist never passes
// for a status of the pod.
//
// # Exits from runtime events
//
// ContainerExited feeds an exit that the runtime's own event service
// reported (runtime/containerdevents: containerd publishes /tasks/exit
// within milliseconds, while its CRI shows the exit hundreds of
// milliseconds later) straight into the Cache: the pod's cached status gets
// the container exited (exit code, finish time, reason Completed, Error or
// OOMKilled as containerd's CRI reports them) and ContainerDied is sent,
// without waiting for a relist. Until a listing shows the exit too, the
// container counts as exited in every listing and status read (no
// ContainerStarted, no second ContainerDied, no status overwritten with
// "running"); then the override goes. An exit of a container not listed
// yet starts a relist at once (RelistSoon) and applies when it is listed.
//
// # Evented mode
//
// An EventedPLEG follows the CRI container event stream (GetContainerEvents),
// turning each event into a cache update and events, while its GenericPLEG
// relists only every 300s (unhealthy after 10m). If the runtime answers
// Unimplemented (containerd 1.6 does) or the stream fails MaxStreamRetries
// (5) times, it logs why and falls back to relisting every second.
//
// # Wiring
//
//	mgr, _ := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri})
//	g, err := pleg.New(pleg.Config{Runtime: mgr, Registerer: reg})
//	go g.Run(ctx)
//	for e := range g.Watch() {
//		status, err := g.Cache().GetNewerThan(ctx, e.ID, lastSync)
//		...
//	}
//
// With an event-capable runtime use pleg.NewEvented(pleg.EventedConfig{
// Config: cfg, Events: criClient}) instead; it has the same Watch, Cache,
// Healthy, RequestReinspect, RequestRelist, HoldPod, ReleasePod and
// ObservePodStatus.
//
// Metrics (when Config.Registerer is set): kubelet_pleg_relist_duration_seconds,
// kubelet_pleg_relist_interval_seconds, kubelet_pleg_discard_events and
// kubelet_pleg_last_seen_seconds, named as the kubelet names them.
package pleg
