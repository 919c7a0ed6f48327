package nodekit

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodByName returns the pod the agent knows under namespace and name (the
// full name: a static pod's name carries the node's name, "web-node1"), or
// false. The pod is shared: treat it as read-only.
func (a *Agent) PodByName(namespace, name string) (*v1.Pod, bool) {
	if a.loop == nil {
		return nil, false
	}
	for _, p := range a.loop.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// PodStatus returns a copy of the latest status of the pod with uid as the
// status manager holds it (what the status sink is sent), or false before
// the pod's first status.
func (a *Agent) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	if a.loop == nil {
		return v1.PodStatus{}, false
	}
	return a.loop.StatusManager().GetPodStatus(uid)
}

// PodCondition is what WaitForPod waits for: it is given the pod and its
// latest status (the status is the pod's own copy).
type PodCondition func(pod *v1.Pod, status v1.PodStatus) bool

// PodRunning is true once every container of the pod runs (phase Running).
func PodRunning(_ *v1.Pod, s v1.PodStatus) bool { return s.Phase == v1.PodRunning }

// PodReady is true while the pod's Ready condition is True.
func PodReady(_ *v1.Pod, s v1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// PodPhase is true once the pod's phase is phase.
func PodPhase(phase v1.PodPhase) PodCondition {
	return func(_ *v1.Pod, s v1.PodStatus) bool { return s.Phase == phase }
}

// WaitForPod waits until the pod namespace/name (the full name, as
// PodByName) exists with a status for which cond is true, and returns the
// pod and that status. It checks at once and again at every change of a pod
// status (podstatus.Manager.Changed), never polling, so it also works on
// virtual time inside a testing/synctest bubble. It returns ctx's error
// (wrapped, naming the pod and its last phase) when ctx ends first, and
// ErrPodTerminal once the pod reached a terminal phase (Succeeded or Failed)
// for which cond is false, since it would wait forever.
func (a *Agent) WaitForPod(ctx context.Context, namespace, name string, cond PodCondition) (*v1.Pod, v1.PodStatus, error) {
	if a.loop == nil {
		return nil, v1.PodStatus{}, fmt.Errorf("%w: the agent was not built", ErrInvalidConfig)
	}
	sm := a.loop.StatusManager()
	last := "not seen"
	for {
		changed := sm.Changed() // before reading: no change can be missed
		if pod, ok := a.PodByName(namespace, name); ok {
			if st, ok := sm.GetPodStatus(pod.UID); ok {
				if cond(pod, st) {
					return pod, st, nil
				}
				last = "phase " + string(st.Phase)
				if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
					return pod, st, fmt.Errorf("%w: pod %s/%s is %s (%s)", ErrPodTerminal, namespace, name, st.Phase, st.Reason)
				}
			} else {
				last = "no status yet"
			}
		}
		select {
		case <-ctx.Done():
			return nil, v1.PodStatus{}, fmt.Errorf("waiting for pod %s/%s (%s): %w", namespace, name, last, ctx.Err())
		case <-changed:
		}
	}
}

// Healthy reports whether the agent works as a node should: it is Ready
// (its sync loop started), every pod source has sent its pods, and the
// runtime is ready and the PLEG keeps up (Loop.RuntimeReady). It returns
// nil, or ErrUnhealthy joined with each reason. It is what a liveness
// endpoint of the embedding program should ask.
//
// Ready, by contrast, is closed once, when the sync loop has started, and
// says nothing about later health.
func (a *Agent) Healthy() error {
	if a.loop == nil {
		return fmt.Errorf("%w: the agent was not built", ErrUnhealthy)
	}
	var errs []error
	select {
	case <-a.loop.Ready():
	default:
		errs = append(errs, errors.New("the sync loop has not started"))
	}
	if !a.sourcesReady() {
		errs = append(errs, errors.New("not every pod source has sent its pods"))
	}
	if _, _, err := a.loop.RuntimeReady(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnhealthy, errors.Join(errs...))
}
