package syncloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/podworkers"
)

// Status reason and message of a pod past its activeDeadlineSeconds (the
// kubelet's).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	deadlineExceededMessage = "Pod was active on the node longer than the specified deadline"
)

// podSyncer is the PodSyncer of the loop: it runs pods through the runtime and
// the pod hooks and reports their statuses to the status manager.
type podSyncer struct {
	rt          RuntimeManager
	status      *podstatus.Manager
	clock       clock.Clock
	log         *zap.Logger
	gen         podstatus.Generator
	probeState  podstatus.ProbeState
	volumes     VolumeHooks
	cgroups     CgroupHooks
	probes      ProbeHooks
	pullSecrets func(ctx context.Context, pod *v1.Pod) ([]v1.Secret, error)
	relist      func(types.UID)
	observe     func(types.UID, *kubetypes.PodStatus)
	hold        func(types.UID)
	release     func(types.UID)
	dirs        podDirs
	network     func() error
	terminated  []func(ctx context.Context, pod *v1.Pod) error
	rec         kubetypes.EventRecorder
	// removeContent and removable: a deleted or evicted pod's dead
	// containers and sandboxes are removed once it has stopped (nil: left
	// to the container GC).
	removeContent func(ctx context.Context, uid types.UID) error
	removable     func(uid types.UID) bool
}

var _ podworkers.PodSyncer = (*podSyncer)(nil)

// retryError is an error that asks to be retried at a given time (a
// BackoffError).
type retryError struct {
	err   error
	until time.Time
}

func (e *retryError) Error() string           { return e.err.Error() }
func (e *retryError) Unwrap() error           { return e.err }
func (e *retryError) BackoffUntil() time.Time { return e.until }

// generate computes the pod's API status from rs, starting from the status
// manager's (or the API's) status; a terminal phase already recorded is kept
// with its reason and message.
func (a *podSyncer) generate(pod *v1.Pod, rs *kubetypes.PodStatus, terminal bool) v1.PodStatus {
	old, ok := a.status.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	now := a.clock.Now()
	var st v1.PodStatus
	if terminal {
		st = a.gen.GenerateTerminal(pod, rs, old, a.rt, a.probeState, now)
	} else {
		st = a.gen.Generate(pod, rs, old, a.rt, a.probeState, now)
	}
	if podstatus.IsTerminalPhase(old.Phase) && st.Phase != old.Phase {
		st.Phase, st.Reason, st.Message = old.Phase, old.Reason, old.Message
	}
	return st
}

// pastActiveDeadline: the pod has an activeDeadlineSeconds and has been
// running (since its StartTime) at least that long.
func (a *podSyncer) pastActiveDeadline(pod *v1.Pod, now time.Time) bool {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false
	}
	start := pod.Status.StartTime
	if st, ok := a.status.GetPodStatus(pod.UID); ok && st.StartTime != nil {
		start = st.StartTime
	}
	if start == nil || start.IsZero() {
		return false
	}
	return now.Sub(start.Time) >= time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second
}

// changing runs change, which changes the pod in the runtime, with the
// pod held in the PLEG (its relists leave the pod alone meanwhile: what
// they would read is about to change, and the agent reads the pod after),
// then tells the pod worker that the runtime reflects the sync from now on.
// The time is taken after the release, so that a relist that left the pod
// out began before it: its cache time cannot serve the next sync.
func (a *podSyncer) changing(ctx context.Context, uid types.UID, change func()) {
	held := a.hold != nil && a.release != nil
	if held {
		a.hold(uid)
	}
	defer func() {
		if held {
			a.release(uid)
		}
		podworkers.MarkRuntimeSynced(ctx, a.clock.Now())
	}()
	change()
}

// readChanged reads the status of a pod the agent just changed and hands
// it to the PLEG (timestamped with the start of the read), which relists
// the pod from it without reading it again. Without a PLEG to hand it to,
// or if the read fails, it asks for the pod to be relisted. After a sync
// (res not nil), a runtime that can reads only what rs and res name.
func (a *podSyncer) readChanged(ctx context.Context, pod *v1.Pod, rs *kubetypes.PodStatus, res *kubetypes.SyncResult) (*kubetypes.PodStatus, error) {
	readAt := a.clock.Now()
	var fresh *kubetypes.PodStatus
	var err error
	if r, ok := a.rt.(afterSyncReader); ok && res != nil {
		fresh, err = r.GetPodStatusAfterSync(ctx, pod, rs, *res)
	} else {
		fresh, err = a.rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	}
	if err != nil || fresh == nil || a.observe == nil {
		a.requestRelist(pod.UID)
		if err == nil && fresh == nil {
			fresh = &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		}
		return fresh, err
	}
	fresh.TimeStamp = readAt
	a.observe(pod.UID, fresh)
	return fresh, nil
}

func (a *podSyncer) requestRelist(uid types.UID) {
	if a.relist != nil {
		a.relist(uid)
	}
}

// SyncPod sets the pod up and has the runtime converge it, then records the
// resulting status. A pod whose status is terminal (or past its active
// deadline, which makes it Failed) is not set up: isTerminal is true.
// A pod that needs the pod network waits (a BackoffError of about 1s) while
// the network is not ready.
func (a *podSyncer) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod, _ *v1.Pod, rs *kubetypes.PodStatus) (bool, error) {
	log := a.log.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("uid", string(pod.UID)))
	st := a.generate(pod, rs, false)
	if !podstatus.IsTerminalPhase(st.Phase) && a.pastActiveDeadline(pod, a.clock.Now()) {
		st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonDeadlineExceeded, deadlineExceededMessage
	}
	a.status.SetPodStatus(pod, st)
	if podstatus.IsTerminalPhase(st.Phase) {
		return true, nil
	}
	if !pod.Spec.HostNetwork {
		if err := a.network(); err != nil {
			return false, &retryError{err: err, until: a.clock.Now().Add(networkRetry)}
		}
	}
	if err := a.dirs.ensure(pod.UID); err != nil {
		return false, err
	}
	if err := a.cgroups.EnsurePodCgroup(ctx, pod); err != nil {
		return false, fmt.Errorf("%w: pod cgroup of %s/%s: %w", ErrHook, pod.Namespace, pod.Name, err)
	}
	if err := a.volumes.WaitForAttachAndMount(ctx, pod); err != nil {
		if ctx.Err() == nil {
			a.rec.Eventf(pod, v1.EventTypeWarning, kubetypes.ReasonFailedMount, "Unable to attach or mount volumes: %v", err)
		}
		return false, fmt.Errorf("%w: volumes of %s/%s: %w", ErrHook, pod.Namespace, pod.Name, err)
	}
	// The prober learns of the pod once this sync has recorded its status:
	// a new probe worker's first look then finds the containers this sync
	// started (on a virtual clock both happen in one instant, and the
	// first probe would otherwise depend on goroutine order).
	defer a.probes.AddPod(pod)
	var secrets []v1.Secret
	if a.pullSecrets != nil && len(pod.Spec.ImagePullSecrets) > 0 {
		s, err := a.pullSecrets(ctx, pod)
		if err != nil {
			// The kubelet carries on without them; a pull may still work.
			log.Warn("image pull secrets not available", zap.Error(err))
		}
		secrets = s
	}
	var res kubetypes.SyncResult
	a.changing(ctx, pod.UID, func() { res = a.rt.SyncPod(ctx, pod, rs, secrets) })
	if len(res.Steps) == 0 && rs != nil && !rs.TimeStamp.IsZero() {
		// The runtime did nothing: any status newer than the one this
		// sync used serves the next (an exit applied while it ran, too;
		// one newer than the sync's end would wait for the next relist).
		podworkers.MarkRuntimeSynced(ctx, rs.TimeStamp)
	}
	syncErr := res.Err()
	if ctx.Err() != nil {
		if len(res.Steps) > 0 {
			a.requestRelist(pod.UID)
		}
		return false, errors.Join(syncErr, ctx.Err())
	}
	if len(res.Steps) == 0 {
		// The runtime did nothing: the status recorded above, from rs,
		// is what there is to record (reading it again costs four CRI
		// calls per pod on every resync).
		return false, syncErr
	}
	// Record what the sync did at once instead of on the next relist, and
	// hand the same read to the PLEG (one read of the pod, not two).
	fresh, err := a.readChanged(ctx, pod, rs, &res)
	if err != nil {
		log.Debug("runtime status after sync not read", zap.Error(err))
		return false, syncErr
	}
	st = a.generate(pod, fresh, false)
	a.status.SetPodStatus(pod, st)
	if podstatus.IsTerminalPhase(st.Phase) {
		return true, nil
	}
	return false, syncErr
}

// SyncTerminatingPod stops the pod's liveness and startup probes, kills its
// containers and sandboxes within gracePeriod, checks that nothing of it
// runs any more, and records the status (amended by podStatusFn).
func (a *podSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs *kubetypes.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error {
	a.probes.StopLivenessAndStartup(pod)
	st := a.generate(pod, rs, true)
	if podStatusFn != nil {
		podStatusFn(&st)
	}
	a.status.SetPodStatus(pod, st)

	var running *kubetypes.Pod
	if rs != nil {
		running = rs.RunningPod()
	}
	var err error
	a.changing(ctx, pod.UID, func() { err = a.rt.KillPod(ctx, pod, running, gracePeriod) })
	if err != nil {
		a.requestRelist(pod.UID)
		return fmt.Errorf("killing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	a.probes.RemovePod(pod)

	fresh, err := a.readChanged(ctx, pod, nil, nil)
	if err != nil {
		return fmt.Errorf("reading the status of pod %s/%s after the kill: %w", pod.Namespace, pod.Name, err)
	}
	var still []string
	for _, cs := range fresh.ContainerStatuses {
		if cs.State == kubetypes.ContainerStateRunning {
			still = append(still, cs.Name)
		}
	}
	if len(still) > 0 {
		return fmt.Errorf("%w: pod %s/%s: %v", ErrPodStillRunning, pod.Namespace, pod.Name, still)
	}
	st = a.generate(pod, fresh, true)
	if podStatusFn != nil {
		podStatusFn(&st)
	}
	a.status.SetPodStatus(pod, st)
	return nil
}

// SyncTerminatingRuntimePod kills a pod only the runtime knows, with a
// grace of 1s (as the kubelet does for orphans).
func (a *podSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubetypes.Pod) error {
	one := int64(1)
	var err error
	a.changing(ctx, rp.ID, func() { err = a.rt.KillPod(ctx, nil, rp, &one) })
	a.requestRelist(rp.ID)
	if err != nil {
		return fmt.Errorf("killing orphaned pod %s/%s (%s): %w", rp.Namespace, rp.Name, rp.ID, err)
	}
	return nil
}

// SyncTerminatedPod records the stopped pod's status, waits for its
// volumes to be unmounted, removes its cgroup and marks its status final.
func (a *podSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, rs *kubetypes.PodStatus) error {
	a.status.SetPodStatus(pod, a.generate(pod, rs, true))
	if err := a.volumes.WaitForUnmount(ctx, pod); err != nil {
		return fmt.Errorf("%w: unmounting volumes of %s/%s: %w", ErrHook, pod.Namespace, pod.Name, err)
	}
	if err := a.cgroups.DestroyPodCgroup(ctx, pod); err != nil {
		return fmt.Errorf("%w: removing the cgroup of %s/%s: %w", ErrHook, pod.Namespace, pod.Name, err)
	}
	for _, f := range a.terminated {
		if err := f(ctx, pod); err != nil {
			return fmt.Errorf("%w: after %s/%s stopped: %w", ErrHook, pod.Namespace, pod.Name, err)
		}
	}
	a.status.TerminatePod(pod)
	a.removePodContent(ctx, pod)
	return nil
}

// removePodContent removes the dead containers and sandboxes of a pod
// whose content may go (deleted and stopped, or evicted: by this agent, or
// as its API status says, like the kubelet after a restart) now rather
// than at the next container GC. A failure is logged, not returned: the
// pod has stopped, and the container GC removes what is left.
func (a *podSyncer) removePodContent(ctx context.Context, pod *v1.Pod) {
	if a.removeContent == nil || a.removable == nil || !(a.removable(pod.UID) || statusEvicted(pod)) {
		return
	}
	var err error
	a.changing(ctx, pod.UID, func() { err = a.removeContent(ctx, pod.UID) })
	a.requestRelist(pod.UID)
	if err != nil && ctx.Err() == nil {
		a.log.Info("cannot remove the containers of a stopped pod; the container GC will",
			zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("uid", string(pod.UID)), zap.Error(err))
	}
}

// statusEvicted: the pod's status says it was evicted (phase Failed,
// reason Evicted), as the eviction manager writes it.
func statusEvicted(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed && pod.Status.Reason == kubetypes.ReasonEvicted
}
