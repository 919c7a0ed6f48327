package kubetypes

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// GCPolicy says which dead containers GarbageCollect may remove. The zero
// value is the kubelet's default policy.
type GCPolicy struct {
	// MinAge: containers created less than MinAge ago are kept. Default 0.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each (pod, container
	// name) are kept. 0 means the default, 1; negative means no limit.
	MaxPerPodContainer int
	// MaxContainers caps the dead containers kept on the node; 0 or
	// negative means no cap (the kubelet's default, -1).
	MaxContainers int
	// EvictNonDeletedPods also removes everything of pods whose runtime may
	// be removed (PodStateProvider.ShouldPodRuntimeBeRemoved), as the
	// eviction manager asks for under disk pressure.
	EvictNonDeletedPods bool
}

// Action is one kind of step SyncPod or KillPod takes.
type Action int

const (
	// ActionSyncPod is a pod-level step that is not one CRI action (the pod
	// failed validation, its sandbox config could not be built, ...).
	ActionSyncPod Action = iota
	ActionCreateSandbox
	ActionKillPod
	ActionStopSandbox
	ActionStartContainer
	ActionKillContainer
	ActionRemoveContainer
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionSyncPod:
		return "SyncPod"
	case ActionCreateSandbox:
		return "CreateSandbox"
	case ActionKillPod:
		return "KillPod"
	case ActionStopSandbox:
		return "StopSandbox"
	case ActionStartContainer:
		return "StartContainer"
	case ActionKillContainer:
		return "KillContainer"
	case ActionRemoveContainer:
		return "RemoveContainer"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// StepResult is the outcome of one step.
type StepResult struct {
	Action Action
	// Target is the container name (container steps), the sandbox id
	// (sandbox steps) or the pod's namespace/name (pod steps).
	Target string
	// Err is nil when the step succeeded.
	Err error
	// Message is a human-readable detail (for a failure, what the kubelet
	// would put in state.waiting.message).
	Message string
	// Reason is the waiting reason of a failed container start
	// (CrashLoopBackOff, ErrImagePull, ...), else "".
	Reason string
	// ID is the runtime ID of the sandbox or container the step made
	// (CreateSandbox, StartContainer), once the runtime returned it.
	ID string
}

// SyncResult is what SyncPod did, step by step, in order.
type SyncResult struct {
	Steps []StepResult
}

// Err joins the errors of the failed steps; nil when every step succeeded.
func (r SyncResult) Err() error {
	var errs []error
	for _, s := range r.Steps {
		if s.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", s.Action, s.Target, s.Err))
		}
	}
	return errors.Join(errs...)
}

// Add appends a step.
func (r *SyncResult) Add(s StepResult) { r.Steps = append(r.Steps, s) }

// FailedSince reports whether any step since index from failed.
func (r *SyncResult) FailedSince(from int) bool {
	for _, s := range r.Steps[from:] {
		if s.Err != nil {
			return true
		}
	}
	return false
}

// PodStateProvider tells container garbage collection which pods are
// finished (the pod workers know; podworkers.Workers satisfies it).
type PodStateProvider interface {
	// ShouldPodContentBeRemoved: the pod is gone for good; its dead
	// containers, sandboxes and log directory may all be removed.
	ShouldPodContentBeRemoved(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved: the pod's containers may be removed even
	// though the pod is not deleted (used when GCPolicy.EvictNonDeletedPods).
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}
