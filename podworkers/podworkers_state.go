package podworkers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podSyncStatus is everything the workers track of one pod UID. It is
// guarded by Workers.mu.
type podSyncStatus struct {
	// ctx is the context of the sync in flight; cancel ends it early (on
	// termination or a shorter grace). A fresh one is made when it ended.
	ctx    context.Context
	cancel context.CancelFunc

	// fullname is "name_namespace", the key of static pod exclusion.
	fullname string

	// working: an update is pending or being processed.
	working bool
	// pending is the next update to process (only the latest is kept).
	pending *UpdatePodOptions
	// active is the merged view of the updates processed so far (the latest
	// pod spec, mirror and kill options).
	active *UpdatePodOptions

	syncedAt      time.Time
	startedAt     time.Time // first update processed (after static exclusion)
	terminatingAt time.Time // termination requested
	terminatedAt  time.Time // containers known stopped

	// gracePeriod is the effective grace (seconds) once terminating; it only
	// ever decreases.
	gracePeriod int64
	// notifyPostTerminating are the CompletedCh to close once stopped;
	// statusPostTerminating the PodStatusFuncs given (the last one is used).
	notifyPostTerminating []chan<- struct{}
	statusPostTerminating []func(*v1.PodStatus)

	// startedTerminating: the worker has seen the termination request.
	startedTerminating bool
	deleted            bool
	evicted            bool
	// finished: SyncTerminatedPod succeeded (or the pod never could start);
	// the worker is gone and updates are ignored.
	finished bool
	// restartRequested: a Create came for the UID while it terminated; the
	// history is dropped at the next SyncKnownPods so it can start again.
	restartRequested bool
	// observedRuntime: a runtime-only kill was seen for the UID.
	observedRuntime bool
	// terminalOnArrival: the first update carried a Succeeded/Failed pod; if
	// the runtime then shows nothing running, stopping is skipped and the
	// pod goes straight to SyncTerminatedPod.
	terminalOnArrival bool
}

func (s *podSyncStatus) terminationRequested() bool { return !s.terminatingAt.IsZero() }

func (s *podSyncStatus) isTerminated() bool { return !s.terminatedAt.IsZero() }

func (s *podSyncStatus) isStarted() bool { return !s.startedAt.IsZero() }

func (s *podSyncStatus) workType() State {
	switch {
	case s.isTerminated():
		return TerminatedPod
	case s.terminationRequested():
		return TerminatingPod
	}
	return SyncPod
}

// mergeLastUpdate folds a processed update into s.active, so that a requeue
// repeats the latest known spec and kill options.
func (s *podSyncStatus) mergeLastUpdate(u UpdatePodOptions) {
	a := s.active
	if a == nil {
		a = &UpdatePodOptions{}
		s.active = a
	}
	// A runtime-only kill does not replace a spec already known.
	if a.Pod == nil || u.RunningPod == nil {
		a.Pod = u.Pod
	}
	a.RunningPod = u.RunningPod
	if u.MirrorPod != nil {
		a.MirrorPod = u.MirrorPod
	}
	a.UpdateType = u.UpdateType
	if k := u.KillPodOptions; k != nil {
		// Channels and status funcs are tracked on s, not repeated.
		nk := &KillPodOptions{Evict: k.Evict}
		if g := k.PodTerminationGracePeriodSecondsOverride; g != nil {
			v := *g
			nk.PodTerminationGracePeriodSecondsOverride = &v
		}
		a.KillPodOptions = nk
	}
}

// work is one update taken by a worker.
type work struct {
	state State
	opts  UpdatePodOptions
	// terminalOnArrival is set on the first update of a pod that arrived in
	// a terminal phase.
	terminalOnArrival bool
}

func podFullName(name, namespace string) string { return name + "_" + namespace }

func isTerminalPhase(pod *v1.Pod) bool {
	return pod != nil && (pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed)
}

// runtimeStatusTerminal: nothing of the pod runs (no running container, no
// ready sandbox). A nil status is terminal: the runtime knows nothing of it.
func runtimeStatusTerminal(s *kubetypes.PodStatus) bool {
	if s == nil {
		return true
	}
	for _, c := range s.ContainerStatuses {
		if c != nil && c.State == kubetypes.ContainerStateRunning {
			return false
		}
	}
	for _, sb := range s.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return false
		}
	}
	return true
}

// calculateEffectiveGracePeriod returns the grace (seconds) a terminating
// pod gets and whether it shortens the one already in force. The grace only
// decreases: the pod's DeletionGracePeriodSeconds, then the kill's override,
// each taken only if shorter than what is in force; with neither, the spec's
// TerminationGracePeriodSeconds. Never less than 1.
func calculateEffectiveGracePeriod(s *podSyncStatus, pod *v1.Pod, k *KillPodOptions) (int64, bool) {
	grace := s.gracePeriod
	overridden := false
	lower := func(v *int64) {
		if v != nil && (grace == 0 || *v < grace) {
			grace = *v
			overridden = true
		}
	}
	if pod != nil {
		lower(pod.DeletionGracePeriodSeconds)
	}
	if k != nil {
		lower(k.PodTerminationGracePeriodSecondsOverride)
	}
	if !overridden && grace == 0 && pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if grace < 1 {
		grace = 1
	}
	return grace, s.gracePeriod != 0 && s.gracePeriod != grace
}

func podFields(uid types.UID, namespace, name string) []zap.Field {
	return []zap.Field{zap.String("pod", namespace+"/"+name), zap.String("podUID", string(uid))}
}

// safeClose closes ch, surviving a channel the caller already closed.
func (p *Workers) safeClose(ch chan<- struct{}) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Warn("a KillPodOptions.CompletedCh was already closed by its owner")
		}
	}()
	close(ch)
}

func appendChan(list []chan<- struct{}, ch chan<- struct{}) []chan<- struct{} {
	for _, c := range list {
		if c == ch {
			return list
		}
	}
	return append(list, ch)
}

// updatePod is UpdatePod returning why an update was dropped (nil when it
// was taken, even if the pod ignores it because it is finished).
func (p *Workers) updatePod(opts UpdatePodOptions) error {
	var (
		uid          types.UID
		name, ns     string
		isRuntimePod bool
	)
	switch {
	case opts.Pod != nil:
		if opts.RunningPod != nil {
			p.log.Debug("RunningPod ignored in an update that has a Pod", podFields(opts.Pod.UID, opts.Pod.Namespace, opts.Pod.Name)...)
			opts.RunningPod = nil
		}
		uid, name, ns = opts.Pod.UID, opts.Pod.Name, opts.Pod.Namespace
	case opts.RunningPod != nil:
		rp := opts.RunningPod
		if opts.UpdateType != SyncPodKill {
			p.log.Debug("runtime-only pod update ignored: such pods can only be killed",
				append(podFields(rp.ID, rp.Namespace, rp.Name), zap.Stringer("updateType", opts.UpdateType))...)
			return fmt.Errorf("%w: RunningPod with update type %v", ErrInvalidUpdate, opts.UpdateType)
		}
		uid, name, ns = rp.ID, rp.Name, rp.Namespace
		isRuntimePod = true
	default:
		return fmt.Errorf("%w: neither Pod nor RunningPod", ErrInvalidUpdate)
	}
	if uid == "" {
		return fmt.Errorf("%w: pod %s/%s has no UID", ErrInvalidUpdate, ns, name)
	}
	// Never mutate the caller's kill options.
	if opts.KillPodOptions != nil {
		k := *opts.KillPodOptions
		opts.KillPodOptions = &k
	}
	log := p.log.With(append(podFields(uid, ns, name), zap.Stringer("updateType", opts.UpdateType))...)

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return ErrStopped
	}
	now := p.clock.Now()
	s, known := p.statuses[uid]
	if !known {
		s = &podSyncStatus{syncedAt: now, fullname: podFullName(name, ns)}
		s.terminalOnArrival = isTerminalPhase(opts.Pod)
		p.statuses[uid] = s
	}

	pod := opts.Pod
	if isRuntimePod {
		s.observedRuntime = true
		// A runtime kill of a pod whose spec is known kills it by its spec.
		switch {
		case s.pending != nil && s.pending.Pod != nil:
			pod = s.pending.Pod
		case s.active != nil && s.active.Pod != nil:
			pod = s.active.Pod
		}
		if pod != nil {
			opts.Pod, opts.RunningPod = pod, nil
		}
	}

	if known && s.terminationRequested() && opts.UpdateType == SyncPodCreate {
		s.restartRequested = true
		log.Debug("pod terminating and created again with the same UID: it restarts once forgotten")
		return nil
	}
	if s.finished {
		if k := opts.KillPodOptions; k != nil && k.CompletedCh != nil {
			p.safeClose(k.CompletedCh)
		}
		log.Debug("pod finished, update ignored")
		return nil
	}

	becameTerminating := false
	if !s.terminationRequested() {
		switch {
		case isRuntimePod:
			log.Debug("orphaned runtime pod: stopping it")
			s.deleted = true
			becameTerminating = true
		case pod.DeletionTimestamp != nil:
			log.Debug("pod deleted: stopping it")
			s.deleted = true
			becameTerminating = true
		case isTerminalPhase(pod):
			log.Debug("pod in a terminal phase: stopping it")
			becameTerminating = true
		case opts.UpdateType == SyncPodKill:
			if k := opts.KillPodOptions; k != nil && k.Evict {
				log.Debug("pod evicted: stopping it")
				s.evicted = true
			} else {
				log.Debug("pod killed: stopping it")
			}
			becameTerminating = true
		}
		if becameTerminating {
			s.terminatingAt = now
		}
	}

	graceShortened := false
	switch {
	case s.isTerminated():
		if isRuntimePod {
			log.Debug("pod already stopped, runtime kill ignored")
			return nil
		}
		if k := opts.KillPodOptions; k != nil && k.CompletedCh != nil {
			p.safeClose(k.CompletedCh)
		}
		opts.KillPodOptions = nil
	case s.terminationRequested():
		if opts.KillPodOptions == nil {
			opts.KillPodOptions = &KillPodOptions{}
		}
		k := opts.KillPodOptions
		if k.CompletedCh != nil {
			s.notifyPostTerminating = appendChan(s.notifyPostTerminating, k.CompletedCh)
		}
		if k.PodStatusFunc != nil {
			s.statusPostTerminating = append(s.statusPostTerminating, k.PodStatusFunc)
		}
		var grace int64
		grace, graceShortened = calculateEffectiveGracePeriod(s, pod, k)
		s.gracePeriod = grace
		k.PodTerminationGracePeriodSecondsOverride = &grace
	default:
		// Not terminating: kill options mean nothing; nobody will wait.
		if k := opts.KillPodOptions; k != nil && k.CompletedCh != nil {
			p.safeClose(k.CompletedCh)
		}
		opts.KillPodOptions = nil
	}

	w, ok := p.workers[uid]
	if !ok {
		w = &podWorker{updates: make(chan struct{}, 1)}
		p.workers[uid] = w
		if kubetypes.IsStaticPod(pod) {
			p.waitingStatic[s.fullname] = append(p.waitingStatic[s.fullname], uid)
		}
		p.startWorkerLocked(uid, w)
	}
	s.pending = &opts
	s.working = true
	select {
	case w.updates <- struct{}{}:
	default:
	}
	if (becameTerminating || graceShortened) && s.cancel != nil {
		log.Debug("cancelling the sync in flight", zap.Stringer("state", s.workType()))
		s.cancel()
	}
	return nil
}

// allowPodStart decides whether a pod's first update may be processed.
// Only static pods wait: one UID per full name runs at a time, in arrival
// order. canEverStart false means the pod was stopped before it started.
// p.mu is held.
func (p *Workers) allowPodStart(pod *v1.Pod) (canStart, canEverStart bool) {
	if !kubetypes.IsStaticPod(pod) {
		return true, true
	}
	s, ok := p.statuses[pod.UID]
	if !ok || s.terminationRequested() {
		return false, false
	}
	if !p.allowStaticPodStart(s.fullname, pod.UID) {
		p.queue.Enqueue(pod.UID, p.jitter(p.backOff))
		return false, true
	}
	return true, true
}

// allowStaticPodStart: uid may run under fullname if it already does, or if
// nothing does and it is the first live waiter. p.mu is held.
func (p *Workers) allowStaticPodStart(fullname string, uid types.UID) bool {
	if running, ok := p.startedStatic[fullname]; ok {
		return running == uid
	}
	waiting := p.waitingStatic[fullname]
	for i, w := range waiting {
		s, ok := p.statuses[w]
		if !ok || s.terminationRequested() || s.isTerminated() {
			continue // gone or stopping: drop it from the line
		}
		if w != uid {
			p.waitingStatic[fullname] = waiting[i:]
			return false
		}
		waiting = waiting[i+1:]
		break
	}
	if len(waiting) > 0 {
		p.waitingStatic[fullname] = waiting
	} else {
		delete(p.waitingStatic, fullname)
	}
	p.startedStatic[fullname] = uid
	return true
}

// startPodSync takes the pending update of uid. ok false: nothing to do.
func (p *Workers) startPodSync(runCtx context.Context, uid types.UID) (ctx context.Context, wk work, canStart, canEverStart, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return nil, wk, false, false, false
	}
	if s.pending == nil {
		s.working = false
		return nil, wk, false, false, false
	}
	wk.state = s.workType()
	wk.opts = *s.pending
	wk.terminalOnArrival = s.terminalOnArrival
	s.pending = nil
	if w, ok := p.workers[uid]; ok {
		select { // the wake-up for the update just taken
		case <-w.updates:
		default:
		}
	}
	if s.ctx == nil || s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancel(runCtx)
	}
	ctx = s.ctx

	if s.isStarted() || (wk.opts.RunningPod != nil && wk.state == TerminatingPod) {
		s.terminalOnArrival = false
		s.mergeLastUpdate(wk.opts)
		return ctx, wk, true, true, true
	}
	if wk.opts.Pod == nil {
		s.mergeLastUpdate(wk.opts)
		return ctx, wk, false, false, true
	}
	canStart, canEverStart = p.allowPodStart(wk.opts.Pod)
	switch {
	case !canEverStart:
		p.finishUnstartedLocked(uid, s)
		return ctx, wk, false, false, true
	case !canStart:
		s.pending = &wk.opts
		s.working = false
		return ctx, wk, false, true, true
	}
	s.startedAt = p.clock.Now()
	s.terminalOnArrival = false
	s.mergeLastUpdate(wk.opts)
	return ctx, wk, true, true, true
}

// workerLoop is the goroutine of one pod UID.
func (p *Workers) workerLoop(runCtx context.Context, uid types.UID, updates <-chan struct{}) {
	defer p.wg.Done()
	var lastSync time.Time
	for {
		select {
		case <-runCtx.Done():
			return
		case _, open := <-updates:
			if !open {
				return
			}
		}
		if runCtx.Err() != nil {
			return
		}
		ctx, wk, canStart, canEverStart, ok := p.startPodSync(runCtx, uid)
		switch {
		case !ok:
			continue
		case !canEverStart:
			return
		case !canStart:
			continue
		}
		var name, ns string
		if rp := wk.opts.RunningPod; rp != nil {
			name, ns = rp.Name, rp.Namespace
		} else {
			name, ns = wk.opts.Pod.Name, wk.opts.Pod.Namespace
		}
		log := p.log.With(append(podFields(uid, ns, name), zap.Stringer("state", wk.state))...)

		isTerminal, err := p.runSync(ctx, uid, wk, &lastSync)

		transition := false
		switch {
		case errors.Is(err, context.Canceled), err != nil && ctx.Err() != nil:
			// Cancelled, or cut short because the workers stop (the
			// runtime's error for it need not be context.Canceled).
			log.Debug("sync cancelled", zap.Error(err))
		case backOffOnly(err):
			// Waiting out a crash-loop or image-pull back-off is normal
			// operation; the pod's status shows the reason.
			log.Info("pod sync waiting on a back-off", zap.Error(err))
		case err != nil:
			log.Error("pod sync failed", zap.Error(err))
		case wk.state == TerminatedPod:
			p.completeTerminated(uid)
			return
		case wk.state == TerminatingPod && wk.opts.RunningPod != nil:
			p.completeTerminatingRuntimePod(uid)
			return
		case wk.state == TerminatingPod:
			p.completeTerminating(uid)
			if p.terminated != nil {
				p.terminated(uid) // CouldHaveRunningContainers is false from now on
			}
			transition = true
		case isTerminal:
			p.completeSync(uid)
			transition = true
		}
		p.completeWork(uid, transition, err)
	}
}

// runSync reads the cache and calls the syncer for one update.
func (p *Workers) runSync(ctx context.Context, uid types.UID, wk work, lastSync *time.Time) (isTerminal bool, err error) {
	var status *kubetypes.PodStatus
	if wk.opts.RunningPod == nil {
		status, err = p.cache.GetNewerThan(ctx, uid, *lastSync)
		if err != nil {
			return false, fmt.Errorf("reading the runtime status: %w", err)
		}
	}
	start := p.clock.Now()
	mark := &syncMark{}
	ctx = context.WithValue(ctx, syncMarkKey{}, mark)
	op := ""
	switch wk.state {
	case TerminatedPod:
		op = "terminated"
		err = p.syncer.SyncTerminatedPod(ctx, wk.opts.Pod, status)
	case TerminatingPod:
		op = "terminating"
		statusFn, grace := p.acknowledgeTerminating(uid, wk)
		switch {
		case wk.opts.RunningPod != nil:
			err = p.syncer.SyncTerminatingRuntimePod(ctx, wk.opts.RunningPod)
		case wk.terminalOnArrival && runtimeStatusTerminal(status):
			// Seen first in a terminal phase with nothing running: there is
			// nothing to stop.
			op = ""
		default:
			err = p.syncer.SyncTerminatingPod(ctx, wk.opts.Pod, status, &grace, statusFn)
		}
	default:
		op = wk.opts.UpdateType.String()
		isTerminal, err = p.syncer.SyncPod(ctx, wk.opts.UpdateType, wk.opts.Pod, wk.opts.MirrorPod, status)
	}
	end := p.clock.Now()
	if p.duration != nil && op != "" {
		p.duration.WithLabelValues(op).Observe(end.Sub(start).Seconds())
	}
	// The next sync waits for a runtime status at least as new as this
	// sync's last change to the runtime: the end of the sync, or the
	// earlier time the syncer marked (MarkRuntimeSynced).
	*lastSync = end
	if !mark.at.IsZero() && mark.at.Before(end) {
		*lastSync = mark.at
	}
	return isTerminal, err
}

// acknowledgeTerminating records that the worker has seen the termination
// and returns the status func to use (the last one given) and the grace
// period in force (computed now if termination came from SyncPod).
func (p *Workers) acknowledgeTerminating(uid types.UID, wk work) (func(*v1.PodStatus), int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		s = &podSyncStatus{}
	}
	if s.terminationRequested() {
		s.startedTerminating = true
	}
	if s.gracePeriod == 0 {
		s.gracePeriod, _ = calculateEffectiveGracePeriod(s, wk.opts.Pod, wk.opts.KillPodOptions)
	}
	var fn func(*v1.PodStatus)
	if n := len(s.statusPostTerminating); n > 0 {
		fn = s.statusPostTerminating[n-1]
	}
	return fn, s.gracePeriod
}

// completeSync: SyncPod reported the pod terminal; it now terminates.
func (p *Workers) completeSync(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return
	}
	if s.terminatingAt.IsZero() {
		s.terminatingAt = p.clock.Now()
	}
	s.startedTerminating = true
	p.requeueLastUpdateLocked(uid, s)
}

// completeTerminating: the containers are stopped; release the waiters and
// move on to terminated.
func (p *Workers) completeTerminating(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return
	}
	s.terminatedAt = p.clock.Now()
	for _, ch := range s.notifyPostTerminating {
		p.safeClose(ch)
	}
	s.notifyPostTerminating = nil
	s.statusPostTerminating = nil
	p.requeueLastUpdateLocked(uid, s)
}

// completeTerminatingRuntimePod: a runtime-only pod is stopped; nothing more
// is needed of it, so its history goes at once.
func (p *Workers) completeTerminatingRuntimePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeWorkerLocked(uid)
	s, ok := p.statuses[uid]
	if !ok {
		return
	}
	s.terminatedAt = p.clock.Now()
	p.finishLocked(uid, s)
	delete(p.statuses, uid)
}

// completeTerminated: the pod is finished; its worker ends.
func (p *Workers) completeTerminated(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeWorkerLocked(uid)
	if s, ok := p.statuses[uid]; ok {
		p.finishLocked(uid, s)
	}
}

// finishUnstartedLocked: a pod stopped before it could start is finished.
func (p *Workers) finishUnstartedLocked(uid types.UID, s *podSyncStatus) {
	p.closeWorkerLocked(uid)
	s.terminatedAt = p.clock.Now()
	for _, ch := range s.notifyPostTerminating {
		p.safeClose(ch)
	}
	s.notifyPostTerminating = nil
	s.statusPostTerminating = nil
	p.finishLocked(uid, s)
}

func (p *Workers) finishLocked(uid types.UID, s *podSyncStatus) {
	s.finished = true
	s.working = false
	s.pending = nil
	if s.cancel != nil {
		s.cancel()
	}
	if p.startedStatic[s.fullname] == uid {
		delete(p.startedStatic, s.fullname)
	}
	p.dropWaitingStaticLocked(s.fullname, uid)
}

// dropWaitingStaticLocked takes uid out of the line of static pods waiting
// for fullname, and the line with it once it is empty: a name whose pods
// all went away keeps nothing. p.mu is held.
func (p *Workers) dropWaitingStaticLocked(fullname string, uid types.UID) {
	waiting, ok := p.waitingStatic[fullname]
	if !ok {
		return
	}
	kept := waiting[:0]
	for _, w := range waiting {
		if w != uid {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(p.waitingStatic, fullname)
		return
	}
	clear(waiting[len(kept):])
	p.waitingStatic[fullname] = kept
}

// closeWorkerLocked ends uid's goroutine (it sees its channel closed) and
// forgets it.
func (p *Workers) closeWorkerLocked(uid types.UID) {
	if w, ok := p.workers[uid]; ok {
		close(w.updates)
		delete(p.workers, uid)
	}
}

// requeueLastUpdateLocked makes the last processed update pending again, so
// the worker proceeds to the next state at once.
func (p *Workers) requeueLastUpdateLocked(uid types.UID, s *podSyncStatus) {
	if s.pending != nil || s.active == nil {
		return
	}
	u := *s.active
	s.pending = &u
	s.working = true
	if w, ok := p.workers[uid]; ok {
		select {
		case w.updates <- struct{}{}:
		default:
		}
	}
}

// requeueDelay is how long the pod waits on the work queue after a sync.
func (p *Workers) requeueDelay(transition bool, err error) time.Duration {
	switch {
	case transition:
		return 0
	case err == nil:
		return p.jitter(p.resync)
	}
	d := p.backOff
	if until, ok := minBackoffUntil(err); ok {
		d = until.Sub(p.clock.Now())
	}
	d = min(max(d, 0), p.resync)
	return p.jitter(d)
}

// completeWork puts the pod back on the work queue and wakes the worker
// again if an update arrived meanwhile.
func (p *Workers) completeWork(uid types.UID, transition bool, err error) {
	p.queue.Enqueue(uid, p.requeueDelay(transition, err))
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return
	}
	if s.pending == nil {
		s.working = false
		return
	}
	if w, ok := p.workers[uid]; ok {
		select {
		case w.updates <- struct{}{}:
		default:
		}
	}
}

// jitter stretches d by up to jitterFactor at random.
func (p *Workers) jitter(d time.Duration) time.Duration {
	return d + time.Duration(p.rand()*jitterFactor*float64(d))
}

// minBackoffUntil finds the earliest BackoffUntil of the BackoffErrors in
// err's tree (through Unwrap() error and Unwrap() []error).
func minBackoffUntil(err error) (time.Time, bool) {
	var (
		best  time.Time
		found bool
	)
	var walk func(error, int)
	walk = func(e error, depth int) {
		if e == nil || depth > 64 {
			return
		}
		if be, ok := e.(BackoffError); ok {
			if t := be.BackoffUntil(); !found || t.Before(best) {
				best, found = t, true
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c, depth+1)
			}
		}
	}
	walk(err, 0)
	return best, found
}

// removeWorkerLocked handles an orphaned pod or one asked to restart in
// SyncKnownPods. It returns true when the pod's history was dropped.
func (p *Workers) removeWorkerLocked(uid types.UID, s *podSyncStatus, orphan bool) bool {
	if !s.finished {
		if !orphan {
			return false // restart requested but still terminating: later
		}
		s.deleted = true
		switch {
		case !s.isStarted() && !s.observedRuntime:
			// Never started: nothing can run; drop it below.
		case !s.terminationRequested():
			s.terminatingAt = p.clock.Now()
			if s.active != nil && s.active.Pod != nil {
				s.gracePeriod, _ = calculateEffectiveGracePeriod(s, s.active.Pod, nil)
			} else {
				s.gracePeriod = 1
			}
			if s.cancel != nil {
				s.cancel()
			}
			p.requeueLastUpdateLocked(uid, s)
			p.log.Debug("orphaned pod still running: stopping it", zap.String("podUID", string(uid)))
			return false
		default:
			p.requeueLastUpdateLocked(uid, s)
			return false
		}
	}
	delete(p.statuses, uid)
	p.closeWorkerLocked(uid)
	if s.cancel != nil {
		s.cancel()
	}
	if p.startedStatic[s.fullname] == uid {
		delete(p.startedStatic, s.fullname)
	}
	p.dropWaitingStaticLocked(s.fullname, uid)
	return true
}

// backOffOnly reports whether err is a crash-loop or image-pull back-off and
// nothing else: every error of a join, at any depth, must be one.
func backOffOnly(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, x := range errs {
			if !backOffOnly(x) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return backOffOnly(e.Unwrap())
	}
	// The end of a chain (the sentinels wrap nothing).
	return err == kubetypes.ErrCrashLoopBackOff || err == kubetypes.ErrImagePullBackOff
}

// syncMark is where a PodSyncer running in a pod worker records when it
// last changed the pod in the runtime (MarkRuntimeSynced).
type syncMark struct{ at time.Time }

type syncMarkKey struct{}

// MarkRuntimeSynced tells the pod worker running this sync (ctx is the one
// it passed to the PodSyncer) that the sync changes nothing more in the
// runtime after t: every runtime status read at or after t shows all it
// did. The worker then waits for a cached status at least as new as t
// before the next sync, instead of one newer than the sync's end, so that
// a status read at the end of the sync (and handed to the PLEG) serves the
// next sync without waiting for a relist. A sync that changed nothing may
// give the time of the status it used: anything newer serves the next. A
// later call replaces an earlier one; outside a pod worker it does
// nothing.
func MarkRuntimeSynced(ctx context.Context, t time.Time) {
	if m, ok := ctx.Value(syncMarkKey{}).(*syncMark); ok {
		m.at = t
	}
}

// RecordRuntimeSynced returns a context in which MarkRuntimeSynced records
// its time, and a func that reads the time recorded last (zero if none):
// what a pod worker passes to each PodSyncer call, for testing a PodSyncer
// on its own.
func RecordRuntimeSynced(ctx context.Context) (context.Context, func() time.Time) {
	mark := &syncMark{}
	return context.WithValue(ctx, syncMarkKey{}, mark), func() time.Time { return mark.at }
}
