// Package runtime is nodekit's pod -> CRI action engine: the part of a kubelet
// that turns a desired *v1.Pod and the runtime's current view of it into CRI
// calls (the kubelet's kuberuntime).
//
// A Manager is built over a narrow CRI interface (see CRI) and offers:
//
//	m, err := runtime.New(runtime.Config{Runtime: cri, Images: cri})
//	pods, err := m.GetPods(ctx, false)                 // what runs, from labels
//	status, err := m.GetPodStatus(ctx, uid, name, ns)  // the runtime view of one pod
//	result := m.SyncPod(ctx, pod, status, pullSecrets) // converge one pod
//	err = m.KillPod(ctx, pod, runningPod, nil)         // stop it, honouring grace
//	err = m.GarbageCollect(ctx, policy, allSourcesReady)
//
// The types Pod, PodStatus and ContainerStatus are the runtime view that the
// pleg and syncloop packages read.
package runtime
