package syncloop

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/qos"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/podworkers"
)

// RuntimeManager is what the loop needs of the pod → CRI engine;
// *kuberuntime.Manager satisfies it.
type RuntimeManager interface {
	GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error)
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubetypes.PodStatus, error)
	SyncPod(ctx context.Context, pod *v1.Pod, status *kubetypes.PodStatus, pullSecrets []v1.Secret) kubetypes.SyncResult
	KillPod(ctx context.Context, pod *v1.Pod, running *kubetypes.Pod, gracePeriodOverride *int64) error
	GarbageCollect(ctx context.Context, policy kubetypes.GCPolicy, pods kubetypes.PodStateProvider, allSourcesReady bool) error
	Reason(uid types.UID, containerName string) (reason, message string)
}

// RuntimeStatusGetter is the CRI Status call (cri-api's RuntimeService and
// runtime/fake satisfy it).
type RuntimeStatusGetter interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// podForgetter is the optional capability of a RuntimeManager to drop what
// it remembers of a pod that is gone (*kuberuntime.Manager has it).
type podForgetter interface {
	ForgetPod(uid types.UID)
}

// podContentRemover is the optional capability of a RuntimeManager to
// remove a stopped pod's dead containers and sandboxes at once
// (*kuberuntime.Manager has it). With it, a pod the pod workers say may
// lose its content (deleted and stopped, or evicted) loses it when its
// worker finishes, instead of at the next container GC.
type podContentRemover interface {
	RemovePodContent(ctx context.Context, uid types.UID) error
}

// afterSyncReader is the optional capability of a RuntimeManager to read a
// pod's status after SyncPod from what the sync started with and did,
// with fewer calls than GetPodStatus (*kuberuntime.Manager has it).
type afterSyncReader interface {
	GetPodStatusAfterSync(ctx context.Context, pod *v1.Pod, before *kubetypes.PodStatus, res kubetypes.SyncResult) (*kubetypes.PodStatus, error)
}

// PLEG is what the loop needs of the pod lifecycle event generator:
// pleg's GenericPLEG and EventedPLEG satisfy it. Its events reach the loop
// through Config.Events (the PLEG's Watch channel).
type PLEG interface {
	// GetNewerThan is the PLEG's pod status cache, which the pod workers
	// read: it returns a pod's status once one at least as new as t is
	// cached.
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error)
	// Healthy reports whether the PLEG keeps up; while it does not, the
	// loop dispatches nothing.
	Healthy() (bool, error)
	// RequestRelist asks for the pod to be relisted soon: called after the
	// agent changed the pod in the runtime, so that the cache catches up
	// before the next periodic relist.
	RequestRelist(uid types.UID)
}

// podStatusObserver is the optional capability of a PLEG to take the
// agent's own read of a pod after it changed the pod (ObservePodStatus,
// instead of RequestRelist: the PLEG relists the pod from that status
// without reading it again; the status's TimeStamp is when the read began
// and nobody modifies it afterwards), and to leave a pod out of relists
// while the agent changes it (HoldPod and ReleasePod bracket every change).
// Both of pleg's PLEGs have it.
type podStatusObserver interface {
	ObservePodStatus(uid types.UID, status *kubetypes.PodStatus)
	HoldPod(uid types.UID)
	ReleasePod(uid types.UID)
}

// runtimeLister is the optional capability of a PLEG to hand out its last
// listing of the runtime and when it began: housekeeping uses it when it is
// at most listingMaxAge old, as the kubelet's runtime cache is, instead of
// listing the runtime again. Both of pleg's PLEGs have it.
type runtimeLister interface {
	Listing() ([]*kubetypes.Pod, time.Time)
}

// listingMaxAge is how old a PLEG listing housekeeping may use.
const listingMaxAge = 2 * time.Second

// VolumeHooks mounts and unmounts a pod's volumes (the volume manager).
type VolumeHooks interface {
	// WaitForAttachAndMount returns once every volume of the pod is mounted.
	WaitForAttachAndMount(ctx context.Context, pod *v1.Pod) error
	// WaitForUnmount returns once every volume of the stopped pod is unmounted.
	WaitForUnmount(ctx context.Context, pod *v1.Pod) error
}

// CgroupHooks creates and removes a pod's cgroup (the container manager).
type CgroupHooks interface {
	EnsurePodCgroup(ctx context.Context, pod *v1.Pod) error
	DestroyPodCgroup(ctx context.Context, pod *v1.Pod) error
}

// ProbeHooks starts and stops a pod's probes (the prober).
type ProbeHooks interface {
	AddPod(pod *v1.Pod)
	RemovePod(pod *v1.Pod)
	StopLivenessAndStartup(pod *v1.Pod)
}

// Defaults of Config (the kubelet's values).
const (
	DefaultSyncPeriod          = time.Second
	DefaultHousekeepingPeriod  = 2 * time.Second
	DefaultRuntimeHealthPeriod = 5 * time.Second
	DefaultContainerGCPeriod   = time.Minute
	DefaultResyncInterval      = time.Minute
	DefaultBackOffPeriod       = 10 * time.Second

	// runtimeBackoffMin and runtimeBackoffMax bound the pause of the loop
	// while the runtime is down (doubling from min).
	runtimeBackoffMin = 100 * time.Millisecond
	runtimeBackoffMax = 5 * time.Second
	// networkRetry is how soon a pod that waits for the network is retried.
	networkRetry = time.Second
)

// Config configures a Loop. Updates, Runtime and Cache are required.
type Config struct {
	// NodeName is the node's name (for logs and, later, node status).
	NodeName string
	// Updates delivers the desired pods (podconfig's Updates, converted).
	// When it is closed, the loop ends and Run returns nil.
	Updates <-chan kubetypes.PodUpdate
	// Events delivers pod lifecycle events (pleg's Watch, converted); nil
	// means none: pods are then synced on their resync only.
	Events <-chan *kubetypes.PodLifecycleEvent
	// SourcesReady reports whether every configured source has delivered its
	// pods at least once. Until it does, nothing is killed for being
	// unknown and housekeeping does not run. Nil means always ready.
	SourcesReady func() bool

	// Runtime runs the pods. Required.
	Runtime RuntimeManager
	// RuntimeStatus is asked for the runtime's health every
	// RuntimeHealthPeriod; nil means the runtime and its network are always
	// taken to be ready.
	RuntimeStatus RuntimeStatusGetter
	// PLEG is the pod lifecycle event generator: the pod workers read its
	// cache, the loop dispatches nothing while it is unhealthy, and the pod
	// syncer tells it about the changes it makes. Required; pleg's
	// GenericPLEG and EventedPLEG satisfy it. See PLEG for its optional
	// capabilities.
	PLEG PLEG

	// StatusSink receives the pod statuses; nil means a new MemorySink
	// (see StatusSink()).
	StatusSink podstatus.Sink
	// StatusGenerator turns runtime statuses into API statuses (runtime
	// name, node IPs); the zero value is fine.
	StatusGenerator podstatus.Generator
	// ProbeState gives the readiness and startup results for the API
	// status; nil means no probes run.
	ProbeState podstatus.ProbeState
	// ProbeResults delivers the prober's result changes; nil means none.
	// A liveness or startup failure syncs the pod (the runtime then
	// restarts the container); a readiness or startup change is recorded
	// in the status manager and syncs the pod.
	ProbeResults <-chan ProbeUpdate

	// Root is the agent's root directory: each pod gets Root/pods/<uid>
	// with its containers subdirectory (volumes and plugins are made by
	// what mounts there). "" means no directories are managed.
	Root string

	// Admitters are extra admission checks run after the built-in ones
	// (resource fit, host ports), in order; the first rejection wins.
	Admitters []AdmitHandler
	// NodeAllocatable gives the node's allocatable resources for the
	// resource-fit check; nil skips that check (host ports are still checked).
	NodeAllocatable func() v1.ResourceList

	// PullSecrets fetches a pod's imagePullSecrets; nil means none.
	PullSecrets func(ctx context.Context, pod *v1.Pod) ([]v1.Secret, error)

	// Volumes, Cgroups and Probes are the pod hooks; nil means no-op.
	Volumes VolumeHooks
	Cgroups CgroupHooks
	Probes  ProbeHooks

	// PodTerminated functions are called once a pod has fully stopped (its
	// containers gone, volumes unmounted, cgroup removed), before its final
	// status is set: where the cpu and memory managers give back what the
	// pod held. An error is retried like any failed termination step.
	PodTerminated []func(ctx context.Context, pod *v1.Pod) error

	// GCPolicy is passed to Runtime.GarbageCollect. Its
	// MaxPerPodContainer (at least 1) is also how many exited instances of
	// a container the dead container deletor keeps (see HandleEvent).
	GCPolicy kubetypes.GCPolicy

	// Periods; zero means the default, negative is an error.
	SyncPeriod          time.Duration // due pods are synced: 1s
	HousekeepingPeriod  time.Duration // cleanups: 2s
	RuntimeHealthPeriod time.Duration // CRI Status: 5s
	ContainerGCPeriod   time.Duration // GarbageCollect: 1m
	ResyncInterval      time.Duration // a synced pod is synced again: 1m
	BackOffPeriod       time.Duration // a failed sync is retried: 10s
	// Rand returns a number in [0,1) for the pod workers' jitter of the
	// two delays above (each stretched by up to half); nil = math/rand/v2.
	// A test that must be exact returns a constant.
	Rand func() float64

	// Idle, if set, is called by every housekeeping round that finds the
	// node idle: no pod is desired or known to the pod workers and the
	// runtime holds no sandbox or container (container GC has removed the
	// last dead ones). since is when the first round of this idle stretch
	// ran (the loop's clock); it changes only after a round that found the
	// node busy, so the hook can act once per stretch, and later in the
	// stretch than its first round if it must wait (a rate limit). It is
	// called from the housekeeping goroutine and must not block for long.
	// The Builder can return the process's freed memory to the OS there
	// (see nodekit.Builder.WithIdleMemoryRelease).
	Idle func(since time.Time)

	// Recorder records the loop's events: admission rejections (the
	// handler's reason, Warning), FailedMount, ContainerGCFailed, and the
	// pod workers' ExceededGracePeriod. Nil records none.
	Recorder kubetypes.EventRecorder

	Clock  clock.WithTicker
	Logger *zap.Logger
	// Registerer, if set, receives the loop's and the pod workers' metrics.
	Registerer prometheus.Registerer
}

// Loop is the agent's sync loop: it takes desired pods from Config.Updates,
// admits them, hands them to the pod workers, syncs pods on PLEG events and
// when their resync is due, and cleans up after pods that are gone.
// Create it with New.
type Loop struct {
	cfg     Config
	clock   clock.WithTicker
	log     *zap.Logger
	metrics *loopMetrics

	workers   *podworkers.Workers
	status    *podstatus.Manager
	sink      podstatus.Sink
	podSyncer *podSyncer
	admit     []AdmitHandler

	// deletor removes dead containers on ContainerDied events; nil when
	// the runtime cannot (see deletor.go).
	deletor *containerDeletor

	// podsMu guards pods (the desired pods by UID: the pod manager).
	podsMu sync.RWMutex
	pods   map[types.UID]*v1.Pod
	// seen holds the UIDs handed to the pod workers that the runtime may
	// still remember (back-offs), for housekeeping to forget.
	seen map[types.UID]struct{}
	// noContainers holds the pods rejected at admission that the runtime
	// was seen not to run (see rejectPod); under podsMu.
	noContainers map[types.UID]struct{}

	// houseMu serialises housekeeping and guards lastGC, knownPods and
	// idleSince.
	houseMu   sync.Mutex
	lastGC    time.Time
	knownPods bool      // the pod workers were told the pods at least once
	idleSince time.Time // the first round of this idle stretch; zero: busy (Config.Idle)

	health healthState

	// iterMu serialises Iterate and guards the fields below.
	iterMu         sync.Mutex
	syncTicker     clock.Ticker
	houseTicker    clock.Ticker
	runtimeBackoff time.Duration

	readyOnce sync.Once
	ready     chan struct{}

	// lastIteration is when the last iteration began (UnixNano; 0 = none
	// yet), for SyncLoopHealthy.
	lastIteration atomic.Int64

	once lifecycle.Once
}

// SyncLoopHealthyAfter is how long the loop may go without starting an
// iteration before SyncLoopHealthy fails (the kubelet's five minutes).
const SyncLoopHealthyAfter = 5 * time.Minute

// SyncLoopHealthy is the kubelet's /healthz/syncloop check: an error when
// the loop, having started, has not begun an iteration for
// SyncLoopHealthyAfter (one is stuck); nil before the first.
func (l *Loop) SyncLoopHealthy() error {
	last := l.lastIteration.Load()
	if last == 0 {
		return nil
	}
	if since := l.clock.Since(time.Unix(0, last)); since > SyncLoopHealthyAfter {
		return fmt.Errorf("sync loop took longer than expected: no iteration for %s", since.Round(time.Second))
	}
	return nil
}

// New validates cfg, fills its defaults and returns a Loop. It does no I/O
// and starts nothing. All config errors are returned at once, each naming
// its field and wrapping ErrInvalidConfig.
func New(cfg Config) (*Loop, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if cfg.Updates == nil {
		bad("Updates is required")
	}
	if cfg.Runtime == nil {
		bad("Runtime is required")
	}
	if cfg.PLEG == nil {
		bad("PLEG is required")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"SyncPeriod", &cfg.SyncPeriod, DefaultSyncPeriod},
		{"HousekeepingPeriod", &cfg.HousekeepingPeriod, DefaultHousekeepingPeriod},
		{"RuntimeHealthPeriod", &cfg.RuntimeHealthPeriod, DefaultRuntimeHealthPeriod},
		{"ContainerGCPeriod", &cfg.ContainerGCPeriod, DefaultContainerGCPeriod},
		{"ResyncInterval", &cfg.ResyncInterval, DefaultResyncInterval},
		{"BackOffPeriod", &cfg.BackOffPeriod, DefaultBackOffPeriod},
	} {
		if *d.v < 0 {
			bad("%s (%v) is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for i, a := range cfg.Admitters {
		if a == nil {
			bad("Admitters[%d] is nil", i)
		}
	}
	if cfg.Root != "" && !isAbsClean(cfg.Root) {
		bad("Root (%q) must be an absolute, clean path", cfg.Root)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.SourcesReady == nil {
		cfg.SourcesReady = func() bool { return true }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.StatusSink == nil {
		cfg.StatusSink = podstatus.NewMemorySink()
	}
	log := cfg.Logger.Named("syncloop")
	l := &Loop{
		cfg:            cfg,
		clock:          cfg.Clock,
		log:            log,
		sink:           cfg.StatusSink,
		pods:           make(map[types.UID]*v1.Pod),
		seen:           make(map[types.UID]struct{}),
		noContainers:   make(map[types.UID]struct{}),
		ready:          make(chan struct{}),
		runtimeBackoff: runtimeBackoffMin,
	}
	m, err := newLoopMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
	}
	l.metrics = m
	l.podSyncer = &podSyncer{
		rt:          cfg.Runtime,
		clock:       cfg.Clock,
		log:         log.Named("agent"),
		gen:         cfg.StatusGenerator,
		probeState:  cfg.ProbeState,
		volumes:     cfg.Volumes,
		cgroups:     cfg.Cgroups,
		probes:      cfg.Probes,
		pullSecrets: cfg.PullSecrets,
		relist:      cfg.PLEG.RequestRelist,
		dirs:        podDirs{root: cfg.Root},
		network:     l.networkReady,
		terminated:  cfg.PodTerminated,
		rec:         kubetypes.RecorderOrNop(cfg.Recorder),
	}
	if o, ok := cfg.PLEG.(podStatusObserver); ok {
		l.podSyncer.observe, l.podSyncer.hold, l.podSyncer.release = o.ObservePodStatus, o.HoldPod, o.ReleasePod
	}
	if l.podSyncer.volumes == nil {
		l.podSyncer.volumes = noopHooks{}
	}
	if l.podSyncer.cgroups == nil {
		l.podSyncer.cgroups = noopHooks{}
	}
	if l.podSyncer.probes == nil {
		l.podSyncer.probes = noopHooks{}
	}
	pw, err := podworkers.New(podworkers.Config{
		Syncer:         l.podSyncer,
		Cache:          cfg.PLEG,
		ResyncInterval: cfg.ResyncInterval,
		BackOffPeriod:  cfg.BackOffPeriod,
		Recorder:       cfg.Recorder,
		Rand:           cfg.Rand,
		// A terminal phase the status manager held back while the
		// containers could run is offered at the instant they stopped.
		ContainersStopped: func(uid types.UID) { l.status.RecheckPod(uid) },
		Clock:             cfg.Clock,
		Logger:            cfg.Logger,
		Registerer:        cfg.Registerer,
	})
	if err != nil {
		return nil, err
	}
	sm, err := podstatus.New(podstatus.Config{
		Sink:              cfg.StatusSink,
		Clock:             cfg.Clock,
		Logger:            log,
		ContainerActivity: loopActivity{l},
	})
	if err != nil {
		return nil, err
	}
	l.workers, l.status = pw, sm
	l.podSyncer.status = sm
	if r, ok := cfg.Runtime.(podContentRemover); ok {
		l.podSyncer.removeContent, l.podSyncer.removable = r.RemovePodContent, pw.ShouldPodContentBeRemoved
	}
	l.deletor = newContainerDeletor(cfg.Runtime, cfg.GCPolicy, log)
	l.admit = append([]AdmitHandler{
		&resourceFitAdmitter{allocatable: cfg.NodeAllocatable},
		hostPortAdmitter{},
	}, cfg.Admitters...)
	return l, nil
}

// loopActivity is the status manager's ContainerActivity: the pod
// workers' answer, except that a pod rejected at admission which the
// runtime was seen not to run, and that has no worker, has no containers,
// workers synced or not.
type loopActivity struct{ l *Loop }

func (a loopActivity) CouldHaveRunningContainers(uid types.UID) bool {
	if !a.l.workers.CouldHaveRunningContainers(uid) {
		return false
	}
	if _, hasWorker := a.l.workers.PodState(uid); hasWorker {
		return true
	}
	a.l.podsMu.RLock()
	_, none := a.l.noContainers[uid]
	a.l.podsMu.RUnlock()
	return !none
}

// noopHooks is the do-nothing VolumeHooks, CgroupHooks and ProbeHooks.
type noopHooks struct{}

func (noopHooks) WaitForAttachAndMount(context.Context, *v1.Pod) error { return nil }
func (noopHooks) WaitForUnmount(context.Context, *v1.Pod) error        { return nil }
func (noopHooks) EnsurePodCgroup(context.Context, *v1.Pod) error       { return nil }
func (noopHooks) DestroyPodCgroup(context.Context, *v1.Pod) error      { return nil }
func (noopHooks) AddPod(*v1.Pod)                                       {}
func (noopHooks) RemovePod(*v1.Pod)                                    {}
func (noopHooks) StopLivenessAndStartup(*v1.Pod)                       {}

// StatusManager returns the loop's status manager.
func (l *Loop) StatusManager() *podstatus.Manager { return l.status }

// PodWorkers returns the loop's pod workers.
func (l *Loop) PodWorkers() *podworkers.Workers { return l.workers }

// StatusSink returns the sink the statuses go to (Config.StatusSink or the
// MemorySink made in its place).
func (l *Loop) StatusSink() podstatus.Sink { return l.sink }

// Ready is closed once the runtime was first seen up and the loop began
// dispatching.
func (l *Loop) Ready() <-chan struct{} { return l.ready }

// Pods returns the pods the agent currently knows (the desired pods, those
// rejected by admission included), oldest first. The pods are shared: treat
// them as read-only.
func (l *Loop) Pods() []*v1.Pod {
	l.podsMu.RLock()
	out := make([]*v1.Pod, 0, len(l.pods))
	for _, p := range l.pods {
		out = append(out, p)
	}
	l.podsMu.RUnlock()
	sortPodsByCreation(out)
	return out
}

// Pod returns the known pod with the given UID.
func (l *Loop) Pod(uid types.UID) (*v1.Pod, bool) {
	l.podsMu.RLock()
	defer l.podsMu.RUnlock()
	p, ok := l.pods[uid]
	return p, ok
}

// Run starts the pod workers, the status manager and the runtime health
// checks, then iterates until Updates is closed or ctx ends, and returns
// once every goroutine it started has exited. It returns nil then. If one of
// those components returns before ctx ends (a failure, or nil: none of them
// stops on its own), Run stops the others and returns an error wrapping
// ErrComponentStopped and the component's error, naming it; it does not
// restart it.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (l *Loop) Run(ctx context.Context) error {
	if err := l.once.Start(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
		failed   error
	)
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			err := fn(ctx)
			if ctx.Err() != nil {
				return // stopped by ctx or by Run: any return is expected
			}
			failOnce.Do(func() {
				failed = fmt.Errorf("%w: %w", ErrComponentStopped, lifecycle.StoppedEarly(name, err))
				l.log.Error("component stopped early: sync loop stops", zap.String("component", name), zap.Error(err))
				cancel()
			})
		})
	}
	start("podworkers", l.workers.Run)
	start("status", l.status.Run)
	if l.cfg.RuntimeStatus != nil {
		start("health", l.runHealth)
	}
	if l.deletor != nil {
		start("deletor", l.deletor.run)
	}
	for l.Iterate(ctx) {
	}
	cancel()
	wg.Wait()
	l.iterMu.Lock()
	if l.syncTicker != nil {
		l.syncTicker.Stop()
		l.houseTicker.Stop()
	}
	l.iterMu.Unlock()
	return failed
}

// Iterate runs one iteration of the loop: while the runtime or the PLEG is
// unhealthy it dispatches nothing and waits (100ms, doubling up to 5s, on
// the clock, or until the PLEG's first relist if it offers Relisted);
// otherwise it waits for one of: a config update, a PLEG event,
// a probe result change, the sync tick (pods whose resync is due), the
// housekeeping tick (cleanups, when all sources are ready), and handles it. There is no priority between
// them. It returns false when Updates is closed or ctx is done.
// Iterations are serialised.
func (l *Loop) Iterate(ctx context.Context) bool {
	l.iterMu.Lock()
	defer l.iterMu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	l.lastIteration.Store(l.clock.Now().UnixNano())
	if l.syncTicker == nil {
		l.syncTicker = l.clock.NewTicker(l.cfg.SyncPeriod)
		l.houseTicker = l.clock.NewTicker(l.cfg.HousekeepingPeriod)
	}
	// A PLEG that says when its first relist succeeded ends the health
	// wait below at that instant, so that the agent's start does not
	// depend on which of the two ran first. The channel is taken before
	// the check: closed after it, it wakes the wait at once.
	var relisted <-chan struct{}
	if r, ok := l.cfg.PLEG.(interface{ Relisted() <-chan struct{} }); ok {
		if ch := r.Relisted(); !isClosed(ch) {
			relisted = ch
		}
	}
	if err := l.runtimeErr(ctx); err != nil {
		l.log.Info("skipping pod synchronization", zap.Error(err), zap.Duration("backoff", l.runtimeBackoff))
		t := l.clock.NewTimer(l.runtimeBackoff)
		defer t.Stop()
		l.runtimeBackoff = min(2*l.runtimeBackoff, runtimeBackoffMax)
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
		case <-relisted:
		}
		return true
	}
	l.runtimeBackoff = runtimeBackoffMin
	l.readyOnce.Do(func() { close(l.ready) })

	select {
	case <-ctx.Done():
		return false
	case u, ok := <-l.cfg.Updates:
		if !ok {
			l.log.Info("config channel closed: sync loop ends")
			return false
		}
		l.HandleUpdate(u)
	case e := <-l.cfg.Events:
		l.HandleEvent(e)
	case <-l.syncTicker.C():
		l.HandlePodSyncs(l.PodsToSync())
	case u := <-l.cfg.ProbeResults:
		l.HandleProbeResult(u)
	case <-l.houseTicker.C():
		if !l.cfg.SourcesReady() {
			l.log.Debug("housekeeping skipped: sources not ready")
			break
		}
		if err := l.HandlePodCleanups(ctx); err != nil {
			if ctx.Err() != nil {
				// Stopping: a cleanup cut short is no failure.
				l.log.Debug("housekeeping interrupted by shutdown", zap.Error(err))
				break
			}
			l.log.Warn("housekeeping failed", zap.Error(err))
		}
	}
	return true
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// HandleUpdate dispatches one config update by its Op.
func (l *Loop) HandleUpdate(u kubetypes.PodUpdate) {
	l.metrics.configUpdate(u.Source, u.Op)
	pods := make([]*v1.Pod, 0, len(u.Pods))
	for _, p := range u.Pods {
		if p != nil && p.UID != "" {
			pods = append(pods, p)
		}
	}
	switch u.Op {
	case kubetypes.ADD:
		l.HandlePodAdditions(pods)
	case kubetypes.UPDATE, kubetypes.DELETE:
		l.HandlePodUpdates(pods)
	case kubetypes.REMOVE:
		l.HandlePodRemoves(pods)
	case kubetypes.RECONCILE:
		l.HandlePodReconcile(pods)
	case kubetypes.SET:
		l.handleSet(u.Source, pods)
	default:
		l.log.Warn("config update with an unknown op ignored", zap.Int("op", int(u.Op)))
	}
}

// ProbeType names the probe of a ProbeUpdate.
type ProbeType string

// The probe types of a ProbeUpdate.
const (
	ProbeLiveness  ProbeType = "Liveness"
	ProbeReadiness ProbeType = "Readiness"
	ProbeStartup   ProbeType = "Startup"
)

// ProbeUpdate is a change of a probe result of one container instance
// (ContainerID is the API ID "<runtime>://<id>").
type ProbeUpdate struct {
	PodUID      types.UID
	ContainerID string
	Type        ProbeType
	Result      kubetypes.ProbeResult
}

// HandleProbeResult acts on a probe result change of a known pod: a
// liveness change syncs the pod only when it is a Failure; a readiness or
// startup change is first recorded in the status manager (the container's
// Ready or Started, and the pod's conditions), then the pod is synced.
func (l *Loop) HandleProbeResult(u ProbeUpdate) {
	pod, ok := l.Pod(u.PodUID)
	if !ok {
		return
	}
	switch u.Type {
	case ProbeLiveness:
		if u.Result != kubetypes.ProbeFailure {
			return
		}
	case ProbeReadiness:
		l.status.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == kubetypes.ProbeSuccess)
	case ProbeStartup:
		l.status.SetContainerStartup(u.PodUID, u.ContainerID, u.Result == kubetypes.ProbeSuccess)
	default:
		return
	}
	l.HandlePodSyncs([]*v1.Pod{pod})
}

// HandleEvent syncs the pod of a PLEG event if the agent knows it. Removal
// events are ignored (the pod was synced when the container died). A
// container's death, of a known pod or not, also has the pod's older dead
// containers removed when the runtime can (see removeDeadContainers). Run
// serves those requests; without Run, up to 50 wait and later ones are
// dropped (each drop logged), which costs nothing but the log line:
// container GC removes what they would have.
func (l *Loop) HandleEvent(e *kubetypes.PodLifecycleEvent) {
	if e == nil || e.Type == kubetypes.ContainerRemoved {
		return
	}
	l.metrics.plegEvent(e.Type)
	pod, ok := l.Pod(e.ID)
	if ok {
		l.HandlePodSyncs([]*v1.Pod{pod})
	} else {
		l.log.Debug("PLEG event for an unknown pod", zap.String("uid", string(e.ID)), zap.String("type", string(e.Type)))
	}
	if e.Type == kubetypes.ContainerDied {
		l.removeDeadContainers(e, pod)
	}
}

// PodsToSync returns the known pods whose resync is due on the pod workers'
// queue, and those whose activeDeadlineSeconds has passed.
func (l *Loop) PodsToSync() []*v1.Pod {
	due := l.workers.WorkQueue().GetWork()
	set := make(map[types.UID]struct{}, len(due))
	for _, uid := range due {
		set[uid] = struct{}{}
	}
	now := l.clock.Now()
	var out []*v1.Pod
	l.podsMu.RLock()
	for uid, p := range l.pods {
		if _, ok := set[uid]; ok || l.podSyncer.pastActiveDeadline(p, now) {
			out = append(out, p)
		}
	}
	l.podsMu.RUnlock()
	sortPodsByCreation(out)
	return out
}

// networkReady reports the runtime's network readiness as last seen.
func (l *Loop) networkReady() error {
	_, net, err := l.RuntimeReady()
	if net {
		return nil
	}
	if err == nil {
		err = errors.New("network plugin not ready")
	}
	return fmt.Errorf("%w: %w", ErrNetworkNotReady, err)
}

// sortPodsByCreation sorts pods oldest first (by creation time, then UID).
func sortPodsByCreation(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].UID < pods[j].UID
	})
}

// HandlePodAdditions admits new pods, oldest first, against the active
// pods: a rejected pod gets the status Failed with the handler's reason and
// the message "Pod was rejected: <message>" and no worker; the others are
// handed to the pod workers. Pods already terminal or terminating are not
// admitted (they are only wound down). Mirror pods are ignored.
func (l *Loop) HandlePodAdditions(pods []*v1.Pod) {
	pods = append([]*v1.Pod(nil), pods...)
	sortPodsByCreation(pods)
	adm := l.beginAdmission(pods) // the active pods once; see admission.go
	for _, pod := range pods {
		if kubetypes.IsMirrorPod(pod) {
			l.log.Debug("mirror pod ignored", zap.String("pod", pod.Namespace+"/"+pod.Name))
			continue
		}
		l.podsMu.Lock()
		l.pods[pod.UID] = pod
		l.seen[pod.UID] = struct{}{}
		l.podsMu.Unlock()
		if !l.workers.IsPodTerminationRequested(pod.UID) && pod.DeletionTimestamp == nil && !l.isAdmittedPodTerminal(pod) {
			if r := adm.admit(pod); !r.Admit {
				l.rejectPod(pod, r)
				continue
			}
		}
		adm.add(pod)
		l.podsMu.Lock()
		delete(l.noContainers, pod.UID)
		l.podsMu.Unlock()
		l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
	}
}

// rejectPod records the admission failure as the pod's status. A
// rejected pod gets no worker, so the agent never starts its containers;
// when the PLEG's listing (made by this agent, after any earlier one
// stopped) shows none either, the pod has no containers and its Failed
// status may go to the sink at once: without that, the status manager
// holds it back until housekeeping first tells the pod workers every pod.
func (l *Loop) rejectPod(pod *v1.Pod, r AdmitResult) {
	l.log.Info("pod rejected", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("uid", string(pod.UID)),
		zap.String("reason", r.Reason), zap.String("message", r.Message))
	l.metrics.rejected(r.Reason)
	if lister, ok := l.cfg.PLEG.(runtimeLister); ok {
		if listing, at := lister.Listing(); !at.IsZero() && !listed(listing, pod.UID) {
			l.podsMu.Lock()
			l.noContainers[pod.UID] = struct{}{}
			l.podsMu.Unlock()
		}
	}
	kubetypes.RecorderOrNop(l.cfg.Recorder).Event(pod, v1.EventTypeWarning, r.Reason, r.Message)
	l.status.SetPodStatus(pod, v1.PodStatus{
		Phase:    v1.PodFailed,
		Reason:   r.Reason,
		Message:  RejectedMessagePrefix + r.Message,
		QOSClass: qos.Class(pod),
	})
}

// listed reports whether uid is one of the listed runtime pods.
func listed(pods []*kubetypes.Pod, uid types.UID) bool {
	for _, p := range pods {
		if p != nil && p.ID == uid {
			return true
		}
	}
	return false
}

// HandlePodUpdates records changed pods (a deletion timestamp included)
// and hands them to their workers.
func (l *Loop) HandlePodUpdates(pods []*v1.Pod) {
	for _, pod := range pods {
		if kubetypes.IsMirrorPod(pod) {
			continue
		}
		l.podsMu.Lock()
		l.pods[pod.UID] = pod
		l.podsMu.Unlock()
		l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: pod})
	}
}

// HandlePodRemoves forgets pods that left their source and, once every
// source is ready, has their workers stop them. Before that, the kill is
// left to housekeeping (a source that has not delivered yet may still
// list them).
func (l *Loop) HandlePodRemoves(pods []*v1.Pod) {
	ready := l.cfg.SourcesReady()
	for _, pod := range pods {
		if kubetypes.IsMirrorPod(pod) {
			continue
		}
		l.podsMu.Lock()
		known, ok := l.pods[pod.UID]
		delete(l.pods, pod.UID)
		delete(l.noContainers, pod.UID)
		l.podsMu.Unlock()
		if !ready {
			l.log.Info("pod removal: kill skipped until all sources are ready", zap.String("pod", pod.Namespace+"/"+pod.Name))
			continue
		}
		if ok {
			pod = known
		}
		l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod})
	}
}

// HandlePodReconcile records pods whose status alone changed, and syncs
// those whose readiness gates no longer agree with their Ready condition.
func (l *Loop) HandlePodReconcile(pods []*v1.Pod) {
	for _, pod := range pods {
		if kubetypes.IsMirrorPod(pod) {
			continue
		}
		l.podsMu.Lock()
		_, known := l.pods[pod.UID]
		l.pods[pod.UID] = pod
		l.podsMu.Unlock()
		if known && l.needsReadinessReconcile(pod) {
			l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: pod})
		}
	}
}

// needsReadinessReconcile: the pod has readiness gates and the Ready
// condition computed from the API's gate conditions differs from the one
// the status manager holds.
func (l *Loop) needsReadinessReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	st, ok := l.status.GetPodStatus(pod.UID)
	if !ok {
		return false
	}
	_, cur := podstatus.FindCondition(st.Conditions, v1.PodReady)
	want := podstatus.PodReadyCondition(pod, pod.Status.Conditions, podstatus.AllContainerStatuses(&st), st.Phase)
	return cur == nil || cur.Status != want.Status
}

// HandlePodSyncs has the workers of the given known pods sync them.
func (l *Loop) HandlePodSyncs(pods []*v1.Pod) {
	for _, pod := range pods {
		l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: pod})
	}
}

// handleSet turns a full set of pods (of source, or of every source for
// SourceAll or "") into additions, updates, deletions, reconciles and
// removals against the known pods.
func (l *Loop) handleSet(source string, pods []*v1.Pod) {
	all := source == "" || source == kubetypes.SourceAll
	seen := make(map[types.UID]bool, len(pods))
	var adds, updates, reconciles, removes []*v1.Pod
	l.podsMu.RLock()
	for _, p := range pods {
		seen[p.UID] = true
		old, ok := l.pods[p.UID]
		switch {
		case !ok:
			adds = append(adds, p)
		case !apiequality.Semantic.DeepEqual(old.Spec, p.Spec) ||
			!apiequality.Semantic.DeepEqual(old.Labels, p.Labels) ||
			!apiequality.Semantic.DeepEqual(old.Annotations, p.Annotations) ||
			!apiequality.Semantic.DeepEqual(old.DeletionTimestamp, p.DeletionTimestamp) ||
			!apiequality.Semantic.DeepEqual(old.DeletionGracePeriodSeconds, p.DeletionGracePeriodSeconds):
			updates = append(updates, p)
		case !apiequality.Semantic.DeepEqual(old.Status, p.Status):
			reconciles = append(reconciles, p)
		}
	}
	for uid, p := range l.pods {
		if seen[uid] {
			continue
		}
		if all || p.Annotations[kubetypes.ConfigSourceAnnotation] == source {
			removes = append(removes, p)
		}
	}
	l.podsMu.RUnlock()
	sortPodsByCreation(removes)
	if len(removes) > 0 {
		l.HandlePodRemoves(removes)
	}
	if len(adds) > 0 {
		l.HandlePodAdditions(adds)
	}
	if len(updates) > 0 {
		l.HandlePodUpdates(updates)
	}
	if len(reconciles) > 0 {
		l.HandlePodReconcile(reconciles)
	}
}

// ActivePods returns the desired pods that are not known to be stopped: the
// pods admission counts and the managers keep resources for.
func (l *Loop) ActivePods() []*v1.Pod { return l.activePodsExcept("") }
