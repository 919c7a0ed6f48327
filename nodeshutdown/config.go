package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

// The kubelet's words for a node shutdown.
const (
	// Reason and Message are the status of a pod killed by the shutdown
	// (phase Failed) and of its DisruptionTarget condition's message.
	Reason  = "Terminated"
	Message = "Pod was terminated in response to imminent node shutdown."
	// ReasonNotAdmitted and MessageNotAdmitted are the status of a pod
	// refused while the node shuts down.
	ReasonNotAdmitted  = "NodeShutdown"
	MessageNotAdmitted = "Pod was rejected as the node is shutting down."
	// EventReason is the reason of the node events recorded when a
	// shutdown starts and when it is cancelled.
	EventReason = "NodeShutdown"
	// EventShutdown and EventCancelled are those events' messages.
	EventShutdown  = "Shutdown manager detected shutdown event"
	EventCancelled = "Shutdown manager detected shutdown cancellation"
)

// DefaultPriority is the priority of a pod without spec.priority, and of
// the group of the non-critical pods made from GracePeriod (the
// scheduler's DefaultPriorityWhenNoDefaultClassExists).
const DefaultPriority int32 = 0

// PriorityGracePeriod is one priority group of the shutdown, the kubelet's
// ShutdownGracePeriodByPodPriority (k8s.io/kubelet config v1beta1, same
// fields): the pods whose priority is at least Priority (and below the next
// group's) are killed together and given ShutdownGracePeriodSeconds, at
// most, before the next group starts.
type PriorityGracePeriod struct {
	Priority                   int32
	ShutdownGracePeriodSeconds int64
}

// KillPodFunc kills pod through the agent's pod workers with the given
// grace period (seconds) and waits until its containers are stopped (or ctx
// ends). status is applied to the status the pod is stopped with (phase,
// reason, message, DisruptionTarget). podworkers.Workers.KillPodAndWait
// with evict false is one.
type KillPodFunc func(ctx context.Context, pod *v1.Pod, gracePeriodSeconds int64, status func(*v1.PodStatus)) error

// Config configures a Manager. Give either GracePeriod (and optionally
// GracePeriodCriticalPods), the kubelet's shutdownGracePeriod and
// shutdownGracePeriodCriticalPods, or GracePeriodByPodPriority, its
// shutdownGracePeriodByPodPriority; not both.
type Config struct {
	// GracePeriod is the whole time the shutdown takes: the non-critical
	// pods get GracePeriod - GracePeriodCriticalPods, then the critical
	// pods (priority >= kubetypes.SystemCriticalPriority) the rest. Zero,
	// or at least 1s; whole seconds count (a fraction is dropped, as the
	// kubelet does).
	GracePeriod time.Duration
	// GracePeriodCriticalPods is the critical pods' share of GracePeriod
	// (zero, or at least 1s, and at most GracePeriod).
	GracePeriodCriticalPods time.Duration
	// GracePeriodByPodPriority are the priority groups, in any order (they
	// are killed from the lowest priority up); priorities must differ and
	// periods must not be negative.
	GracePeriodByPodPriority []PriorityGracePeriod

	// ActivePods returns the pods the agent runs or is about to run: those
	// the shutdown kills (required). Mirror pods in it are skipped (a
	// static pod is killed as itself).
	ActivePods func() []*v1.Pod
	// KillPod kills one pod (required).
	KillPod KillPodFunc
	// WaitForUnmount, when set, is waited on after a group's kills, until
	// the group's budget ends, for each pod's volumes to be unmounted (as
	// the kubelet waits for its volume manager).
	WaitForUnmount func(ctx context.Context, pod *v1.Pod) error
	// OnChange, when set, is called when the shutdown starts and when it
	// is cancelled, so that the node status reports it at once (the
	// kubelet syncs its node status there). It must not block.
	OnChange func()

	// NodeName names the node of the NodeShutdown events (Recorder).
	NodeName string
	// Recorder records the NodeShutdown events; nil records none.
	Recorder kubetypes.EventRecorder
	// StateDir, when set (an absolute path), is the directory of the
	// state file, StateFileName (the kubelet keeps it in its root
	// directory): the shutdown's start time is stored there when it
	// starts, and both times when it ends, atomically; LoadState (Run)
	// sets the gauges from it, so that after a reboot they tell when the
	// last shutdown began and ended. Empty keeps no file.
	StateDir string
	// Registerer, if set, gets the kubelet's graceful shutdown gauges:
	// kubelet_graceful_shutdown_start_time_seconds and
	// kubelet_graceful_shutdown_end_time_seconds (Unix time).
	Registerer prometheus.Registerer
	Clock      clock.WithTicker
	Logger     *zap.Logger
}

// groups checks the grace periods and returns the priority groups, lowest
// priority first: GracePeriodByPodPriority, or the two made from
// GracePeriod as the kubelet makes them.
func (c *Config) groups() ([]PriorityGracePeriod, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.GracePeriod < 0 || (c.GracePeriod > 0 && c.GracePeriod < time.Second) {
		bad("GracePeriod %v must be either zero or otherwise >= 1 sec", c.GracePeriod)
	}
	if c.GracePeriodCriticalPods < 0 || (c.GracePeriodCriticalPods > 0 && c.GracePeriodCriticalPods < time.Second) {
		bad("GracePeriodCriticalPods %v must be either zero or otherwise >= 1 sec", c.GracePeriodCriticalPods)
	}
	if c.GracePeriodCriticalPods > c.GracePeriod {
		bad("GracePeriodCriticalPods %v must be <= GracePeriod %v", c.GracePeriodCriticalPods, c.GracePeriod)
	}
	if len(c.GracePeriodByPodPriority) > 0 {
		if c.GracePeriod > 0 || c.GracePeriodCriticalPods > 0 {
			bad("cannot specify both GracePeriodByPodPriority and GracePeriod at the same time")
		}
		groups := slices.Clone(c.GracePeriodByPodPriority)
		slices.SortStableFunc(groups, func(a, b PriorityGracePeriod) int { return cmpInt32(a.Priority, b.Priority) })
		for i, g := range groups {
			if g.ShutdownGracePeriodSeconds < 0 {
				bad("GracePeriodByPodPriority: priority %d has a negative grace period (%ds)", g.Priority, g.ShutdownGracePeriodSeconds)
			}
			if i > 0 && groups[i-1].Priority == g.Priority {
				bad("GracePeriodByPodPriority: priority %d given twice", g.Priority)
			}
		}
		return groups, errs
	}
	if c.GracePeriod == 0 {
		bad("no grace period: set GracePeriod or GracePeriodByPodPriority (a node without one has no graceful shutdown)")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	regular := c.GracePeriod - c.GracePeriodCriticalPods
	return []PriorityGracePeriod{
		{Priority: DefaultPriority, ShutdownGracePeriodSeconds: int64(regular / time.Second)},
		{Priority: kubetypes.SystemCriticalPriority, ShutdownGracePeriodSeconds: int64(c.GracePeriodCriticalPods / time.Second)},
	}, nil
}

func cmpInt32(a, b int32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// validate fills defaults and returns every problem at once.
func (c *Config) validate() ([]PriorityGracePeriod, error) {
	groups, errs := c.groups()
	if c.ActivePods == nil {
		errs = append(errs, fmt.Errorf("%w: ActivePods is required", ErrInvalidConfig))
	}
	if c.KillPod == nil {
		errs = append(errs, fmt.Errorf("%w: KillPod is required", ErrInvalidConfig))
	}
	if c.StateDir != "" && (!filepath.IsAbs(c.StateDir) || strings.ContainsRune(c.StateDir, 0)) {
		errs = append(errs, fmt.Errorf("%w: StateDir %q must be an absolute path", ErrInvalidConfig, c.StateDir))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Recorder = kubetypes.RecorderOrNop(c.Recorder)
	return groups, nil
}

// group is a priority group with its pods.
type group struct {
	PriorityGracePeriod
	pods []*v1.Pod
}

// groupPods puts each pod in its group, as the kubelet does: the group of
// the highest priority at or below the pod's; a pod below every group goes
// to the lowest, one above every group to the highest.
func groupPods(groups []PriorityGracePeriod, pods []*v1.Pod) []group {
	out := make([]group, len(groups))
	for i, g := range groups {
		out[i].PriorityGracePeriod = g
	}
	if len(out) == 0 {
		return out
	}
	for _, pod := range pods {
		var prio int32
		if pod.Spec.Priority != nil {
			prio = *pod.Spec.Priority
		}
		i := 0
		for j := len(out) - 1; j >= 0; j-- {
			if out[j].Priority <= prio {
				i = j
				break
			}
		}
		out[i].pods = append(out[i].pods, pod)
	}
	return out
}
