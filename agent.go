package nodekit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/syncloop"
)

type sourceRun struct {
	name string
	src  PodSource
}

// Agent is a node agent wired by a Builder: pod sources merged by podconfig,
// a PLEG relisting the runtime, and the sync loop with its pod workers and
// status manager driving the runtime engine. Run it once.
type Agent struct {
	clock clock.WithTicker
	log   *zap.Logger
	// recorder records events (builder_events.go); node names the node
	// they are about.
	recorder kubetypes.EventRecorder
	node     string
	// rootDir is WithRootDir's.
	rootDir string

	cri       CRI
	remote    *remote.Client
	fake      *fake.Runtime
	mgr       *kuberuntime.Manager
	podConfig *podconfig.PodConfig
	sources   []sourceRun
	push      *podconfig.PushHandler
	pleg      podLifecycle
	generic   *pleg.GenericPLEG
	evented   *pleg.EventedPLEG
	loop      *syncloop.Loop
	parts     []extraPart
	prober    *prober.Manager
	// endpoint is WithRuntimeEndpoint's.
	endpoint    string
	eviction    atomic.Pointer[eviction.Manager]
	logRotation *logs.Manager // container log rotation (builder_logs.go)
	// devices reports the device plugins' resources (WithDeviceManager).
	devices func() (capacity, allocatable v1.ResourceList)
	// readyChecks and nodeStatusKick: builder_nodeready.go.
	readyChecks    []func() error
	nodeStatusKick chan struct{}
	// starters run, in order, before any part starts (state to load before
	// the first pod is admitted).
	starters []func(ctx context.Context) error

	// updates carries podconfig's updates to the sync loop, and is closed
	// when podconfig's stream ends; the loop reads the PLEG's events from
	// its Watch channel.
	updates chan kubetypes.PodUpdate

	once  lifecycle.Once
	done  chan struct{}
	errMu sync.Mutex
	err   error
}

// Runtime returns the runtime engine (pod -> CRI actions).
func (a *Agent) Runtime() *kuberuntime.Manager { return a.mgr }

// CRI returns the container runtime the agent drives.
func (a *Agent) CRI() CRI { return a.cri }

// FakeRuntime returns the in-memory runtime made by WithFakeRuntime, or nil.
func (a *Agent) FakeRuntime() *fake.Runtime { return a.fake }

// PodConfig returns the merge of the pod sources.
func (a *Agent) PodConfig() *podconfig.PodConfig { return a.podConfig }

// podLifecycle is what the Agent uses of its PLEG: a *pleg.GenericPLEG, or
// a *pleg.EventedPLEG (WithEventedPLEG). The sync loop takes it as its
// syncloop.PLEG.
type podLifecycle interface {
	syncloop.PLEG
	Run(ctx context.Context) error
	Watch() <-chan *kubetypes.PodLifecycleEvent
	Cache() *pleg.Cache
}

var (
	_ podLifecycle = (*pleg.GenericPLEG)(nil)
	_ podLifecycle = (*pleg.EventedPLEG)(nil)
)

// PLEG returns the relisting pod lifecycle event generator. With an
// EventedPLEG (see EventedPLEG) it is the one the EventedPLEG runs.
func (a *Agent) PLEG() *pleg.GenericPLEG { return a.generic }

// EventedPLEG returns the event-driven PLEG made by WithEventedPLEG when
// the runtime offers container events, else nil.
func (a *Agent) EventedPLEG() *pleg.EventedPLEG { return a.evented }

// Eviction returns the eviction manager WithEviction wired, or nil.
func (a *Agent) Eviction() *eviction.Manager { return a.eviction.Load() }

// Pressure reports the node's memory, disk and PID pressure as the
// eviction manager sees it (none without WithEviction). It asks at each
// call, so node status can take it before every part is built.
func (a *Agent) Pressure() kubetypes.PressureSource { return agentPressure{a} }

type agentPressure struct{ a *Agent }

func (p agentPressure) IsUnderMemoryPressure() bool {
	m := p.a.Eviction()
	return m != nil && m.IsUnderMemoryPressure()
}

func (p agentPressure) IsUnderDiskPressure() bool {
	m := p.a.Eviction()
	return m != nil && m.IsUnderDiskPressure()
}

func (p agentPressure) IsUnderPIDPressure() bool {
	m := p.a.Eviction()
	return m != nil && m.IsUnderPIDPressure()
}

// Loop returns the sync loop.
func (a *Agent) Loop() *syncloop.Loop { return a.loop }

// StatusManager returns the sync loop's status manager: the latest status
// of every pod the agent runs.
func (a *Agent) StatusManager() *podstatus.Manager { return a.loop.StatusManager() }

// StatusSink returns the sink pod statuses are delivered to: the one given
// to WithStatusSink, else a *podstatus.MemorySink.
func (a *Agent) StatusSink() podstatus.Sink { return a.loop.StatusSink() }

// Pods returns the pods the sync loop currently knows (the desired pods,
// those rejected by admission included), oldest first. They are shared:
// treat them as read-only.
func (a *Agent) Pods() []*v1.Pod { return a.loop.Pods() }

// Ready is closed once the sync loop is ready (it has started and its pod
// workers run).
func (a *Agent) Ready() <-chan struct{} { return a.loop.Ready() }

// Done is closed when Run has returned.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err returns what Run returned, once Done is closed (nil before).
func (a *Agent) Err() error {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.err
}

// part is one running component: its own context (so parts stop one by
// one, in reverse start order) and the channel closed when its Run returned.
type part struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

// Run connects to the runtime (for WithRuntimeEndpoint) and starts the parts
// in dependency order: podconfig and the pod sources, the PLEG, then the sync
// loop (which runs the pod workers and the status manager). When ctx ends or
// a part fails, it stops them in reverse order, each after the one started
// after it has returned, and returns once every goroutine has exited: nil
// after a cancellation, else the first failure (naming the part). Containers
// keep running after Run returns: stopping the agent does not stop pods.
// A runtime given to WithRuntime stays open (its owner closes it); one made
// by WithRuntimeEndpoint is closed. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (a *Agent) Run(ctx context.Context) (err error) {
	if err := a.once.Start(); err != nil {
		return err
	}
	defer func() {
		a.errMu.Lock()
		a.err = err
		a.errMu.Unlock()
		close(a.done)
	}()

	if a.remote != nil {
		defer a.remote.Close(ctx)
		if err := a.remote.Connect(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: %w", ErrConnect, err)
		}
	}

	for _, start := range a.starters {
		if err := start(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}

	a.recordStarting()
	r := newRunner(ctx, len(a.sources)+len(a.parts)+5)
	r.start("podconfig", a.podConfig.Run)
	for _, s := range a.sources {
		r.start("source "+s.name, s.src.Run)
	}
	r.start("pleg", a.pleg.Run)
	r.start("pod updates", a.forwardUpdates)
	for _, p := range a.parts {
		r.start(p.name, p.run)
	}
	r.start("syncloop", a.loop.Run)
	a.log.Info("agent started", zap.Int("sources", len(a.sources)))
	err = r.wait(ctx, a.log)
	a.log.Info("agent stopped")
	return err
}

// runner runs parts, each under its own context that keeps the values of
// the agent's context but not its cancellation, so that they can be stopped
// one by one in reverse start order.
type runner struct {
	base   context.Context
	parts  []*part
	failed chan error
}

func newRunner(ctx context.Context, capacity int) *runner {
	return &runner{base: context.WithoutCancel(ctx), failed: make(chan error, capacity)}
}

// start runs fn in a goroutine. fn returning while its context is live is
// a failure (even with nil), reported to wait.
func (r *runner) start(name string, fn func(context.Context) error) {
	pctx, cancel := context.WithCancel(r.base)
	p := &part{name: name, cancel: cancel, done: make(chan struct{})}
	r.parts = append(r.parts, p)
	go func() {
		defer close(p.done)
		err := fn(pctx)
		if pctx.Err() != nil {
			return // stopped by the runner
		}
		select {
		case r.failed <- fmt.Errorf("%w: %w", ErrPartStopped, lifecycle.StoppedEarly(name, err)):
		default: // another failure is already reported
		}
	}()
}

// wait blocks until ctx ends or a part fails, then stops every part in
// reverse start order, each after the later ones have returned. It returns
// the first failure, or nil when ctx ended.
func (r *runner) wait(ctx context.Context, log *zap.Logger) error {
	var err error
	select {
	case <-ctx.Done():
		log.Info("agent stopping")
	case err = <-r.failed:
		log.Error("agent stopping: a part failed", zap.Error(err))
	}
	for i := len(r.parts) - 1; i >= 0; i-- {
		r.parts[i].cancel()
		<-r.parts[i].done
		log.Debug("part stopped", zap.String("part", r.parts[i].name))
	}
	return err
}

// forwardUpdates converts podconfig's updates for the sync loop until ctx
// ends. When podconfig closes its stream, so does this.
func (a *Agent) forwardUpdates(ctx context.Context) error {
	in := a.podConfig.Updates()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-in:
			if !ok {
				close(a.updates)
				return errors.New("podconfig closed its updates")
			}
			select {
			case a.updates <- u:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// sourcesReady reports whether every pod source has sent its full set.
func (a *Agent) sourcesReady() bool { return a.podConfig.SeenAllSources() }
