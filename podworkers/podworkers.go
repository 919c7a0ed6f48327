package podworkers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors of the pod workers. Match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is missing or bad
	// (the error names it).
	ErrInvalidConfig = errors.New("podworkers: invalid pod workers config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); the same value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrStopped: the pod workers have been stopped (their Run
	// context ended); they take no more updates and cannot run again.
	ErrStopped = errors.New("podworkers: pod workers stopped")
	// ErrInvalidUpdate: an update names no pod (neither Pod nor
	// RunningPod, or an empty UID).
	ErrInvalidUpdate = errors.New("podworkers: invalid pod update")
	// ErrKillTimeout: KillPodAndWait gave up waiting for the pod's
	// containers to stop.
	ErrKillTimeout = errors.New("podworkers: timed out waiting for the pod to be killed")
)

// Defaults of Config (the kubelet's values).
const (
	DefaultResyncInterval = time.Minute
	DefaultBackOffPeriod  = 10 * time.Second
)

// jitterFactor is how much the requeue delays are stretched at most: a delay
// d becomes d + r*jitterFactor*d for a random r in [0,1).
const jitterFactor = 0.5

// minKillWait is the shortest time KillPodAndWait waits for a kill.
const minKillWait = 10 * time.Second

// UpdateType says why a pod is handed to its worker.
type UpdateType int

const (
	// SyncPodSync is a periodic or event-driven resync of a known pod.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate is a change of the pod's spec or metadata.
	SyncPodUpdate
	// SyncPodCreate is the first sight of a pod.
	SyncPodCreate
	// SyncPodKill asks for the pod to be stopped without it being deleted
	// (removal from its source, eviction, preemption).
	SyncPodKill
)

// String returns "sync", "update", "create" or "kill".
func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return fmt.Sprintf("UpdateType(%d)", int(t))
}

// State is where a pod is in its life as the pod workers see it.
type State int

const (
	// SyncPod: the pod should be set up and running.
	SyncPod State = iota
	// TerminatingPod: the pod is no longer set up; its containers are being
	// stopped.
	TerminatingPod
	// TerminatedPod: no container can run any more; the pod's resources are
	// being released.
	TerminatedPod
)

// String returns "sync", "terminating" or "terminated".
func (s State) String() string {
	switch s {
	case SyncPod:
		return "sync"
	case TerminatingPod:
		return "terminating"
	case TerminatedPod:
		return "terminated"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// PodSyncer does the work of the pod workers; the sync loop implements it on
// top of the runtime, volume and cgroup managers and the status manager. Its
// methods are called concurrently for different pods, never concurrently for
// the same pod UID. Each must return promptly (with the context's error) once
// its context is done: the pod workers cancel a sync when a pod begins
// terminating or its grace period is shortened, and when they stop.
type PodSyncer interface {
	// SyncPod sets the pod up and starts or restarts its containers. It
	// returns isTerminal true once the pod has reached a terminal phase; the
	// pod then moves on to terminating. An error makes the pod be retried
	// after a back-off (see BackoffError).
	SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, podStatus *kubetypes.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops the pod's containers within gracePeriod seconds
	// (never nil when called by the pod workers) and records the final
	// status; podStatusFn, if not nil, may amend the status first (eviction
	// and preemption reasons). It is called again, possibly with a shorter
	// grace, until it returns nil, which must mean nothing of the pod runs.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubetypes.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error
	// SyncTerminatingRuntimePod stops the containers of a pod that only the
	// runtime knows (no spec). nil must mean nothing of it runs.
	SyncTerminatingRuntimePod(ctx context.Context, runningPod *kubetypes.Pod) error
	// SyncTerminatedPod releases what the stopped pod still holds (volumes,
	// cgroups) and writes its final status. Once it returns nil the pod is
	// finished on this node.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubetypes.PodStatus) error
}

// PodCache is the runtime pod status cache the workers read before every sync
// (pleg's cache satisfies it).
type PodCache interface {
	// GetNewerThan blocks until the cache holds a status of uid taken after t
	// (or ctx ends) and returns it. A status the runtime does not know is an
	// empty PodStatus carrying only the ID.
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error)
}

// BackoffError is an error that knows until when the failed work should not
// be retried (a crash-loop or image-pull back-off). When a sync fails with
// one (found with errors.As, including inside errors.Join), the pod is
// requeued for the earliest such time instead of after BackOffPeriod, but
// never later than ResyncInterval. A transient condition such as "network not
// ready" can be reported the same way with a short BackoffUntil.
type BackoffError interface {
	error
	BackoffUntil() time.Time
}

// KillPodOptions goes with a SyncPodKill update (or any update of a pod that
// terminates).
type KillPodOptions struct {
	// CompletedCh, if not nil, is closed once the pod's containers are
	// stopped (SyncTerminatingPod returned nil), or at once if they already
	// are. Every channel handed in is closed exactly once; don't pass one
	// that is already closed.
	CompletedCh chan<- struct{}
	// Evict marks the kill as an eviction: the pod's content may then be
	// removed (ShouldPodContentBeRemoved) once it is stopped.
	Evict bool
	// PodStatusFunc, if not nil, amends the final status. When several kills
	// give one, the last one given wins.
	PodStatusFunc func(*v1.PodStatus)
	// PodTerminationGracePeriodSecondsOverride, if not nil, shortens the
	// grace period (it never lengthens it).
	PodTerminationGracePeriodSecondsOverride *int64
}

// UpdatePodOptions is one update handed to a pod's worker.
type UpdatePodOptions struct {
	UpdateType UpdateType
	// Pod is the pod's spec; required unless RunningPod is set.
	Pod *v1.Pod
	// MirrorPod is the API server's mirror of a static Pod, if any.
	MirrorPod *v1.Pod
	// RunningPod is a pod only the runtime knows (no spec): it can only be
	// killed, so it is used only with SyncPodKill and a nil Pod.
	RunningPod *kubetypes.Pod
	// KillPodOptions carries what a kill asks for.
	KillPodOptions *KillPodOptions
}

// KnownPod summarises one pod worker for SyncKnownPods' caller.
type KnownPod struct {
	State State
	// Orphan: the pod was not in the desired set.
	Orphan bool
	// HasConfig: the worker has seen a spec of the pod (it is not a
	// runtime-only pod).
	HasConfig bool
	// Static: the spec is of a static pod (its config source is not "api").
	Static bool
}

// Config configures New. Syncer and Cache are required.
type Config struct {
	Syncer PodSyncer
	Cache  PodCache
	// WorkQueue receives every pod after each sync, due when it should be
	// synced again. Nil means a new queue on Clock (see Workers.WorkQueue).
	WorkQueue *WorkQueue
	// ResyncInterval is the delay before a successfully synced pod is synced
	// again (stretched by up to half at random). Default 1m.
	ResyncInterval time.Duration
	// BackOffPeriod is the delay before a failed sync is retried (stretched
	// by up to half at random). Default 10s.
	BackOffPeriod time.Duration
	// Rand returns a number in [0,1) for the jitter of the requeue delays.
	// Default math/rand/v2.Float64.
	Rand func() float64
	// Recorder records ExceededGracePeriod when KillPodAndWait gives up.
	// Nil records none.
	Recorder kubetypes.EventRecorder
	// ContainersStopped, if set, is called in the pod's worker once a
	// pod's containers are stopped (CouldHaveRunningContainers turned
	// false), so that what waits on that (the status manager's held-back
	// terminal phase) is told at that instant instead of on its next look.
	ContainersStopped func(uid types.UID)

	Clock  clock.Clock
	Logger *zap.Logger
	// Registerer, if not nil, gets the histogram
	// kubelet_pod_worker_duration_seconds{operation_type}.
	Registerer prometheus.Registerer
}

// Workers runs one goroutine per pod UID that drives the pod through its
// life: sync (set up and keep running) → terminating (stop the containers) →
// terminated (release resources) → finished. Updates for a pod are never
// processed concurrently; while a sync runs only the latest further update is
// kept. It is safe for concurrent use.
//
// Updates may be given before Run; their workers start when Run does.
type Workers struct {
	syncer  PodSyncer
	cache   PodCache
	queue   *WorkQueue
	resync  time.Duration
	backOff time.Duration
	rand    func() float64
	rec     kubetypes.EventRecorder
	// terminated is Config.ContainersStopped.
	terminated func(uid types.UID)
	clock      clock.Clock
	log        *zap.Logger
	duration   *prometheus.HistogramVec

	wg sync.WaitGroup

	mu sync.Mutex
	// runCtx is Run's context (nil before Run); every worker context derives
	// from it.
	runCtx  context.Context
	once    lifecycle.Once
	stopped bool
	// podsSynced is set by the first SyncKnownPods: from then on a UID
	// without a worker is known not to run.
	podsSynced bool
	workers    map[types.UID]*podWorker
	statuses   map[types.UID]*podSyncStatus
	// startedStatic maps a static pod's full name to the UID allowed to run
	// under it; waitingStatic lists, in arrival order, the UIDs waiting.
	startedStatic map[string]types.UID
	waitingStatic map[string][]types.UID
}

// podWorker is the wake-up channel of one pod's goroutine.
type podWorker struct {
	updates chan struct{}
	started bool
}

// New validates cfg, fills in defaults and returns pod workers that
// do nothing until Run.
func New(cfg Config) (*Workers, error) {
	var errs []error
	if cfg.Syncer == nil {
		errs = append(errs, fmt.Errorf("%w: Syncer is required", ErrInvalidConfig))
	}
	if cfg.Cache == nil {
		errs = append(errs, fmt.Errorf("%w: Cache is required", ErrInvalidConfig))
	}
	if cfg.ResyncInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: ResyncInterval (%v) is negative", ErrInvalidConfig, cfg.ResyncInterval))
	}
	if cfg.BackOffPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: BackOffPeriod (%v) is negative", ErrInvalidConfig, cfg.BackOffPeriod))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.BackOffPeriod == 0 {
		cfg.BackOffPeriod = DefaultBackOffPeriod
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.WorkQueue == nil {
		cfg.WorkQueue = NewWorkQueue(cfg.Clock)
	}
	p := &Workers{
		syncer:        cfg.Syncer,
		cache:         cfg.Cache,
		queue:         cfg.WorkQueue,
		resync:        cfg.ResyncInterval,
		backOff:       cfg.BackOffPeriod,
		rand:          cfg.Rand,
		terminated:    cfg.ContainersStopped,
		clock:         cfg.Clock,
		rec:           kubetypes.RecorderOrNop(cfg.Recorder),
		log:           cfg.Logger.Named("podworkers"),
		workers:       make(map[types.UID]*podWorker),
		statuses:      make(map[types.UID]*podSyncStatus),
		startedStatic: make(map[string]types.UID),
		waitingStatic: make(map[string][]types.UID),
	}
	if cfg.Registerer != nil {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubelet_pod_worker_duration_seconds",
			Help:    "Duration in seconds of one pod worker operation (create, update, sync, kill, terminating, terminated).",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"})
		if err := cfg.Registerer.Register(h); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.HistogramVec)
			if !ok {
				return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
			}
			h = existing
		}
		p.duration = h
	}
	return p, nil
}

// WorkQueue returns the queue the workers put pods on after each sync.
func (p *Workers) WorkQueue() *WorkQueue { return p.queue }

// Run starts the workers of the pods updated so far and of every later
// update, blocks until ctx ends, then cancels every sync in flight and
// returns once all worker goroutines have exited. See package lifecycle for
// the contract: a second call returns ErrAlreadyRan (wrapping
// ErrStopped as well once the first has returned).
func (p *Workers) Run(ctx context.Context) error {
	if err := p.once.Start(); err != nil {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return fmt.Errorf("%w: %w", err, ErrStopped)
		}
		return err
	}
	p.mu.Lock()
	p.runCtx = ctx
	for uid, w := range p.workers {
		p.startWorkerLocked(uid, w)
	}
	p.mu.Unlock()

	<-ctx.Done()

	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// startWorkerLocked starts w's goroutine if Run has begun and it is not
// running yet. p.mu is held.
func (p *Workers) startWorkerLocked(uid types.UID, w *podWorker) {
	if p.runCtx == nil || p.stopped || w.started {
		return
	}
	w.started = true
	p.wg.Add(1)
	go p.workerLoop(p.runCtx, uid, w.updates)
}

// UpdatePod hands an update to the pod's worker, starting the worker on the
// first update of a UID. Bad updates (no pod, or a RunningPod with a type
// other than SyncPodKill) and updates after the pod workers stopped are
// logged and dropped.
func (p *Workers) UpdatePod(opts UpdatePodOptions) {
	if err := p.updatePod(opts); err != nil {
		p.log.Debug("pod update dropped", zap.Error(err))
	}
}

// PodState returns the state of the pod's worker, and false if the pod
// workers do not know the pod.
func (p *Workers) PodState(uid types.UID) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return 0, false
	}
	return s.workType(), true
}

// IsPodKnownTerminated reports whether the pod's containers are known to be
// stopped (SyncTerminatingPod succeeded). It is false for UIDs without a
// worker; use it to filter the desired pods (admission), not for cleanup.
func (p *Workers) IsPodKnownTerminated(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.isTerminated()
	}
	return false
}

// CouldHaveRunningContainers is true before the first SyncKnownPods, and
// for a known pod until its containers are stopped.
func (p *Workers) CouldHaveRunningContainers(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return !s.isTerminated()
	}
	return !p.podsSynced
}

// ShouldPodBeFinished is true once SyncTerminatedPod succeeded for the pod,
// and, after the first SyncKnownPods, for UIDs without a worker.
func (p *Workers) ShouldPodBeFinished(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.finished
	}
	return p.podsSynced
}

// IsPodTerminationRequested is true from the moment the pod should stop
// until its worker is forgotten. It is false for unknown UIDs.
func (p *Workers) IsPodTerminationRequested(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.terminationRequested()
	}
	return false
}

// ShouldPodContainersBeTerminating is true once the worker has begun
// stopping the pod (it has seen the termination), and, after the first
// SyncKnownPods, for UIDs without a worker.
func (p *Workers) ShouldPodContainersBeTerminating(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.startedTerminating
	}
	return p.podsSynced
}

// ShouldPodRuntimeBeRemoved is true once the pod's containers are stopped,
// and, after the first SyncKnownPods, for UIDs without a worker: resources
// that running containers need (volumes, devices) may then be torn down.
func (p *Workers) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.isTerminated()
	}
	return p.podsSynced
}

// ShouldPodContentBeRemoved is true for an evicted pod, for a deleted pod
// whose containers are stopped, and, after the first SyncKnownPods, for UIDs
// without a worker: everything of the pod (logs, dead containers, volume
// content) may then be removed.
func (p *Workers) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.evicted || (s.deleted && s.isTerminated())
	}
	return p.podsSynced
}

// IsPodForMirrorPodTerminatingByFullName reports whether the static pod
// running under fullName ("name_namespace") is terminating and not yet
// stopped: its mirror pod should not be deleted yet.
func (p *Workers) IsPodForMirrorPodTerminatingByFullName(fullName string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, ok := p.startedStatic[fullName]
	if !ok {
		return false
	}
	s, ok := p.statuses[uid]
	return ok && s.terminationRequested() && !s.isTerminated()
}

// SyncKnownPods tells the workers which pods are desired. After the first
// call, UIDs without a worker count as finished. Finished workers of pods not
// desired (or of pods re-created with the same UID) are forgotten; workers
// of undesired pods that never started are dropped; undesired pods that may
// run begin terminating. It returns the state of every remaining worker; the
// caller re-sends any desired pod that is missing from it.
func (p *Workers) SyncKnownPods(desired []*v1.Pod) map[types.UID]KnownPod {
	want := make(map[types.UID]struct{}, len(desired))
	for _, pod := range desired {
		if pod != nil {
			want[pod.UID] = struct{}{}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.podsSynced = true
	out := make(map[types.UID]KnownPod, len(p.statuses))
	for uid, s := range p.statuses {
		_, ok := want[uid]
		orphan := !ok
		if (s.restartRequested || orphan) && p.removeWorkerLocked(uid, s, orphan) {
			continue
		}
		ws := KnownPod{State: s.workType(), Orphan: orphan}
		var pod *v1.Pod
		switch {
		case s.active != nil:
			pod = s.active.Pod
		case s.pending != nil:
			pod = s.pending.Pod
		}
		if pod != nil {
			ws.HasConfig = true
			ws.Static = kubetypes.IsStaticPod(pod)
		}
		out[uid] = ws
	}
	return out
}

// KillPodAndWait asks the pod's worker to stop the pod (an eviction if evict)
// and waits until its containers are stopped, ctx ends, or
// max(10s, 1.5×grace) passes on the clock (ErrKillTimeout). The
// grace is gracePeriodOverride, else the pod's spec, else 0.
func (p *Workers) KillPodAndWait(ctx context.Context, pod *v1.Pod, evict bool, gracePeriodOverride *int64, statusFn func(*v1.PodStatus)) error {
	if pod == nil {
		return fmt.Errorf("%w: nil pod", ErrInvalidUpdate)
	}
	var grace int64
	switch {
	case gracePeriodOverride != nil:
		grace = *gracePeriodOverride
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	wait := max(minKillWait, time.Duration(grace+grace/2)*time.Second)
	done := make(chan struct{})
	err := p.updatePod(UpdatePodOptions{
		UpdateType: SyncPodKill,
		Pod:        pod,
		KillPodOptions: &KillPodOptions{
			CompletedCh:                              done,
			Evict:                                    evict,
			PodStatusFunc:                            statusFn,
			PodTerminationGracePeriodSecondsOverride: gracePeriodOverride,
		},
	})
	if err != nil {
		return err
	}
	timer := p.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		p.rec.Event(pod, v1.EventTypeWarning, kubetypes.ReasonExceededGracePeriod, "Container runtime did not kill the pod within specified grace period.")
		return fmt.Errorf("%w: pod %s/%s (%s) after %v", ErrKillTimeout, pod.Namespace, pod.Name, pod.UID, wait)
	}
}
