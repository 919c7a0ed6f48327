// Package runtime is nodekit's pod -> CRI action engine: the part of a kubelet
// that turns a desired *v1.Pod and the runtime's current view of it into CRI
// calls (the kubelet's kuberuntime manager).
//
// A Manager is built over the narrow CRI interfaces RuntimeService and
// ImageService (runtime/remote and runtime/fake satisfy them):
//
//	m, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri})
//	pods, err := m.GetPods(ctx, false)                 // what runs, grouped by labels
//	status, err := m.GetPodStatus(ctx, uid, name, ns)  // the runtime view of one pod
//	actions := m.ComputePodActions(pod, status)        // what SyncPod would do (no I/O)
//	result := m.SyncPod(ctx, pod, status, pullSecrets) // converge one pod; result.Err()
//	status, err = m.GetPodStatusAfterSync(ctx, pod, status, result) // re-read, by ID
//	reason, msg := m.Reason(uid, "web")                // e.g. CrashLoopBackOff, for status
//	err = m.KillPod(ctx, pod, runningPod, nil)         // stop it, honouring grace
//	err = m.GarbageCollect(ctx, kubetypes.GCPolicy{}, podWorkers, allSourcesReady)
//	err = m.GetContainerLogs(ctx, pod, "web", &v1.PodLogOptions{TailLines: &n}, w, w)
//
// SyncPod follows the kubelet: a sandbox is (re)created when none is ready,
// several are, or its network changed; init containers run one at a time;
// sidecars (init containers with restartPolicy Always) start before the app
// containers and are kept running; restart policies (pod, container and
// restartPolicyRules) decide restarts; a changed spec hash restarts a
// container; starts go through crash-loop back-off (10s doubling to 5m,
// reset after 10m), the image pull policy and pull back-off, the container
// config, create, start and the postStart hook.
//
// It produces kubetypes' runtime view of a pod (Pod, PodStatus,
// ContainerStatus), which pleg caches and the sync loop reads.
// GarbageCollect takes, per call, the pod workers' word on which pods are
// finished (kubetypes.PodStateProvider). Optional collaborators come
// through Config: ProbeResults (liveness/startup results) and the mount,
// cgroup-parent and runtime-class providers used to build CRI configs.
//
// # Container logs
//
// Each container instance logs to <PodLogsRoot>/<namespace>_<name>_<uid>/
// <container>/<restartCount>.log (the runtime writes it; the kubelet's
// layout), so an instance's previous one keeps its file while it runs.
// GetContainerLogs serves the kubelet's /containerLogs on that: it finds
// the current instance, or with opts.Previous the last terminated one, as
// the kubelet reads the pod's status (a container waiting to restart
// answers both with its last instance), and reads its log with the
// kuberuntime/logs reader: tailLines across rotated and compressed files
// by seeking from the end, limitBytes, sinceSeconds/sinceTime, timestamps,
// stream, and follow, which stops once the instance no longer runs (asked
// of the CRI at most once a second) or ctx ends. Its errors map to HTTP
// statuses: ErrContainerNotFound (a name not in the spec) 404;
// ErrContainerNotStarted, ErrNoPreviousInstance and ErrInvalidLogOptions
// 400, as the kubelet answers. GarbageCollect removes the log directory of
// a pod that is gone.
package kuberuntime
