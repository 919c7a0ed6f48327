package runtimetest

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// CRI is a CRI runtime and image service in one object, as fake.Runtime is.
type CRI interface {
	kuberuntime.RuntimeService
	kuberuntime.ImageService
}

// RunPodOptions tunes RunPod; the zero value is fine.
type RunPodOptions struct {
	// Clock is the clock the engine reads (give the fake runtime's). Nil
	// means the real clock, which is fine as long as nothing backs off.
	Clock clock.Clock
	// PullSecrets are the pod's image pull secrets, if it has any.
	PullSecrets []v1.Secret
}

// RunPod makes the runtime hold pod as the agent would: its sandbox and
// containers carry exactly the io.kubernetes.* labels and annotations the
// engine writes, so a PLEG, a prober or a status manager under test sees
// the pod as it sees one the agent runs, without wiring the engine. It
// syncs the pod with a kuberuntime.Manager until nothing is left to start
// now (init containers that exit at once are followed by the next; one
// still running, or a container in crash-loop back-off, ends it) and returns the pod's
// status as the runtime reports it (the sandbox and container IDs a test
// needs).
//
// A step that fails is an error wrapping ErrRunPod (the sandbox and
// containers created so far stay). RunPod does not let clock time pass.
func RunPod(ctx context.Context, rt CRI, pod *v1.Pod, opts ...RunPodOptions) (*kubetypes.PodStatus, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: nil runtime", ErrRunPod)
	}
	if pod == nil || pod.UID == "" || pod.Name == "" || pod.Namespace == "" {
		return nil, fmt.Errorf("%w: the pod needs a name, a namespace and a UID", ErrRunPod)
	}
	var o RunPodOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: rt, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRunPod, err)
	}
	// Each pass starts at least one container or does nothing; a pod of n
	// init containers needs at most n+1 passes.
	for range len(pod.Spec.InitContainers) + 2 {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return nil, fmt.Errorf("%w: status of %s/%s: %w", ErrRunPod, pod.Namespace, pod.Name, err)
		}
		a := m.ComputePodActions(pod, st)
		if !a.KillPod && !a.CreateSandbox && len(a.InitContainersToStart) == 0 && len(a.ContainersToStart) == 0 && len(a.ContainersToKill) == 0 {
			return st, nil
		}
		res := m.SyncPod(ctx, pod, st, o.PullSecrets)
		if err := res.Err(); err != nil {
			if errors.Is(err, kuberuntime.ErrCrashLoopBackOff) {
				break // a crash-looping container: as far as it goes now
			}
			return nil, fmt.Errorf("%w: %s/%s: %w", ErrRunPod, pod.Namespace, pod.Name, err)
		}
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%w: status of %s/%s: %w", ErrRunPod, pod.Namespace, pod.Name, err)
	}
	return st, nil
}
