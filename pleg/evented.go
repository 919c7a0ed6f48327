package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of EventedConfig.
const (
	DefaultEventedRelistPeriod    = 300 * time.Second
	DefaultEventedRelistThreshold = 10 * time.Minute
	DefaultMaxStreamRetries       = 5
	DefaultCacheUpdatePeriod      = 5 * time.Second
	// EventDeliveryMargin is how far behind the clock the cache's global
	// time is set while events flow: an event the runtime emitted longer
	// ago than that has been received and handled when the event queue is
	// empty. Advancing it to "now" would let a pod worker that changed its
	// pod (a container created) take a status read before the change as
	// current while the change's event is still on its way, and act on it
	// again (a second instance of the container).
	EventDeliveryMargin = 2 * time.Second
)

// EventSource is the CRI container event stream (cri-api's
// RuntimeService.GetContainerEvents; runtime/remote's client offers it).
type EventSource interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// EventedConfig configures an EventedPLEG.
type EventedConfig struct {
	// Config is the GenericPLEG's configuration. Its RelistPeriod and
	// RelistThreshold (default 1s and 3m) apply after a fall-back to
	// relisting; while events flow the relist runs at EventedRelistPeriod.
	Config
	// Events is the CRI event stream. Required.
	Events EventSource
	// EventedRelistPeriod and EventedRelistThreshold are the relist period
	// and health threshold while events flow (default 300s and 10m).
	EventedRelistPeriod    time.Duration
	EventedRelistThreshold time.Duration
	// MaxStreamRetries is how many times the stream may fail before the PLEG
	// falls back to relisting (default 5). Unimplemented falls back at once.
	MaxStreamRetries int
	// CacheUpdatePeriod is how often the cache's global time is advanced
	// while events flow, so that no GetNewerThan waits forever on a lost
	// event (default 5s). It is advanced only when no event is queued, and
	// to EventDeliveryMargin before the clock.
	CacheUpdatePeriod time.Duration
}

// EventedPLEG follows the runtime's container events and keeps a GenericPLEG
// relisting rarely as a safety net. If the event stream is unimplemented (as
// on containerd 1.6) or keeps failing, it falls back to the GenericPLEG
// relisting at its normal period. Create it with NewEvented.
type EventedPLEG struct {
	generic           *GenericPLEG
	rt                Runtime
	src               EventSource
	log               *zap.Logger
	fallbackPeriod    time.Duration
	fallbackThreshold time.Duration
	maxRetries        int
	cacheUpdate       time.Duration
	once              lifecycle.Once
	inUse             atomic.Bool
}

// NewEvented validates cfg, fills defaults and returns an EventedPLEG. It
// starts nothing.
func NewEvented(cfg EventedConfig) (*EventedPLEG, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if cfg.Events == nil {
		bad("Events is required")
	}
	for _, f := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"RelistPeriod", &cfg.RelistPeriod, DefaultRelistPeriod},
		{"RelistThreshold", &cfg.RelistThreshold, DefaultRelistThreshold},
		{"EventedRelistPeriod", &cfg.EventedRelistPeriod, DefaultEventedRelistPeriod},
		{"EventedRelistThreshold", &cfg.EventedRelistThreshold, DefaultEventedRelistThreshold},
		{"CacheUpdatePeriod", &cfg.CacheUpdatePeriod, DefaultCacheUpdatePeriod},
	} {
		if *f.d < 0 {
			bad("%s %v is negative", f.name, *f.d)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if cfg.RelistPeriod > 0 && cfg.RelistThreshold > 0 && cfg.RelistThreshold <= cfg.RelistPeriod {
		bad("RelistThreshold %v must exceed RelistPeriod %v", cfg.RelistThreshold, cfg.RelistPeriod)
	}
	evOK := cfg.EventedRelistPeriod > 0 && cfg.EventedRelistThreshold > 0
	if evOK && cfg.EventedRelistThreshold <= cfg.EventedRelistPeriod {
		evOK = false
		bad("EventedRelistThreshold %v must exceed EventedRelistPeriod %v", cfg.EventedRelistThreshold, cfg.EventedRelistPeriod)
	}
	if cfg.MaxStreamRetries < 0 {
		bad("MaxStreamRetries %d is negative", cfg.MaxStreamRetries)
	}
	if cfg.MaxStreamRetries == 0 {
		cfg.MaxStreamRetries = DefaultMaxStreamRetries
	}
	gcfg := cfg.Config
	gcfg.RelistPeriod, gcfg.RelistThreshold = cfg.EventedRelistPeriod, cfg.EventedRelistThreshold
	if !evOK {
		// Reported above; keep New from naming them again as its own.
		gcfg.RelistPeriod, gcfg.RelistThreshold = DefaultEventedRelistPeriod, DefaultEventedRelistThreshold
	}
	g, err := New(gcfg)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &EventedPLEG{
		generic:           g,
		rt:                cfg.Runtime,
		src:               cfg.Events,
		log:               g.log.Named("evented"),
		fallbackPeriod:    cfg.RelistPeriod,
		fallbackThreshold: cfg.RelistThreshold,
		maxRetries:        cfg.MaxStreamRetries,
		cacheUpdate:       cfg.CacheUpdatePeriod,
	}, nil
}

// Generic returns the GenericPLEG that relists underneath.
func (e *EventedPLEG) Generic() *GenericPLEG { return e.generic }

// Watch returns the channel events are sent on (shared with Generic()).
func (e *EventedPLEG) Watch() <-chan *kubetypes.PodLifecycleEvent { return e.generic.Watch() }

// Cache returns the cache the PLEG writes to.
func (e *EventedPLEG) Cache() *Cache { return e.generic.Cache() }

// GetNewerThan is Cache().GetNewerThan.
func (e *EventedPLEG) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error) {
	return e.generic.GetNewerThan(ctx, uid, t)
}

// InUse reports whether container events are being followed (false before
// Run and after a fall-back to relisting).
func (e *EventedPLEG) InUse() bool { return e.inUse.Load() }

// RequestReinspect is GenericPLEG.RequestReinspect.
func (e *EventedPLEG) RequestReinspect(uid types.UID) { e.generic.RequestReinspect(uid) }

// RequestRelist is GenericPLEG.RequestRelist.
func (e *EventedPLEG) RequestRelist(uid types.UID) { e.generic.RequestRelist(uid) }

// Listing is GenericPLEG.Listing (the relists run seldom while events
// flow, so the listing is then as old as the last of them).
func (e *EventedPLEG) Listing() ([]*kubetypes.Pod, time.Time) { return e.generic.Listing() }

// HoldPod is GenericPLEG.HoldPod.
func (e *EventedPLEG) HoldPod(uid types.UID) { e.generic.HoldPod(uid) }

// ReleasePod is GenericPLEG.ReleasePod.
func (e *EventedPLEG) ReleasePod(uid types.UID) { e.generic.ReleasePod(uid) }

// ObservePodStatus is GenericPLEG.ObservePodStatus.
func (e *EventedPLEG) ObservePodStatus(uid types.UID, status *kubetypes.PodStatus) {
	e.generic.ObservePodStatus(uid, status)
}

// Relist is GenericPLEG.Relist.
func (e *EventedPLEG) Relist(ctx context.Context) error { return e.generic.Relist(ctx) }

// Relisted is GenericPLEG.Relisted.
func (e *EventedPLEG) Relisted() <-chan struct{} { return e.generic.Relisted() }

// Healthy is what the GenericPLEG's Healthy reports (with the long
// threshold while events flow, the normal one after a fall-back).
//
// Unlike the kubelet's evented PLEG, a full event channel does not make it
// unhealthy. The sync loop skips its iterations while the PLEG is
// unhealthy, so nothing would read the channel again and the loop would
// stop for good (kubernetes#72482 is the same deadlock, fixed for the
// relisting PLEG by dropping events). Nothing is lost to a full channel:
// a dropped event's pod gets a PodSync once there is room.
func (e *EventedPLEG) Healthy() (bool, error) {
	return e.generic.Healthy()
}

// Run follows the runtime's container events and runs the GenericPLEG at the
// long period; on fall-back it keeps only the GenericPLEG, at its normal
// period. It returns nil when ctx ends and all its goroutines have exited.
// If the GenericPLEG's Run returns before ctx ends (it was run elsewhere,
// say), Run stops following events and returns an error wrapping
// lifecycle.ErrStoppedEarly and the GenericPLEG's error.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (e *EventedPLEG) Run(ctx context.Context) error {
	if err := e.once.Start(); err != nil {
		return err
	}
	e.inUse.Store(true)
	e.generic.evented.Store(true)
	defer e.stopUsingEvents()

	var wg sync.WaitGroup
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	genericErr := make(chan error, 1)
	wg.Go(func() {
		err := e.generic.Run(ctx)
		if ctx.Err() == nil { // fail fast: stop following events too
			err = lifecycle.StoppedEarly("generic PLEG", err)
			stopStream()
		}
		genericErr <- err
	})

	ch := make(chan *runtimeapi.ContainerEventResponse, cap(e.generic.events))
	wg.Go(func() {
		defer stopStream()
		e.stream(streamCtx, ch)
	})
	wg.Go(func() { e.process(streamCtx, ch) })
	wg.Wait()
	return <-genericErr
}

// statusFromEvent returns the pod status the event carries, or nil when it
// cannot stand for a read of the pod (see HandleEvent).
func (e *EventedPLEG) statusFromEvent(ev *runtimeapi.ContainerEventResponse, uid types.UID, ts time.Time) *kubetypes.PodStatus {
	r, ok := e.rt.(EventStatusReader)
	if !ok || ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		return nil
	}
	id, sandbox := ev.GetContainerId(), ev.GetPodSandboxStatus().GetId()
	if id == "" || id == sandbox {
		return nil
	}
	cached, err := e.generic.cache.Get(uid)
	if err != nil || cached == nil || len(cached.SandboxStatuses) != 1 || cached.SandboxStatuses[0].GetId() != sandbox {
		return nil
	}
	if e.generic.changedSince(uid, ts.Add(-EventDeliveryMargin)) {
		return nil
	}
	st, ok := r.PodStatusFromEvent(ev)
	if !ok || st.ID != uid {
		return nil
	}
	for _, cs := range st.ContainerStatuses {
		if cs.ID == id {
			st.TimeStamp = ts
			return st
		}
	}
	return nil
}

func (e *EventedPLEG) stopUsingEvents() {
	e.inUse.Store(false)
	e.generic.evented.Store(false)
}

// stream (re)opens the event stream until ctx ends or it gives up and falls
// back to relisting.
func (e *EventedPLEG) stream(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse) {
	for attempts := 1; ; attempts++ {
		err := e.src.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			e.log.Info("following container events")
		})
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			e.fallBack("the runtime does not implement GetContainerEvents", err)
			return
		}
		if err == nil {
			err = errors.New("event stream ended")
		}
		if attempts >= e.maxRetries {
			e.fallBack(fmt.Sprintf("the event stream failed %d times", attempts), err)
			return
		}
		e.log.Warn("container event stream failed; relisting and retrying", zap.Int("attempt", attempts), zap.Error(err))
		// Catch up on whatever the broken stream lost.
		e.generic.globalRelist(ctx)
	}
}

func (e *EventedPLEG) fallBack(why string, err error) {
	e.log.Warn("falling back to relisting: "+why, zap.Duration("relistPeriod", e.fallbackPeriod), zap.Error(err))
	e.stopUsingEvents()
	e.generic.SetRelistPeriod(e.fallbackPeriod, e.fallbackThreshold)
}

// process handles events until ctx ends, and advances the cache's global
// time every CacheUpdatePeriod.
func (e *EventedPLEG) process(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse) {
	t := e.generic.clock.NewTicker(e.cacheUpdate)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			// Only with no event waiting (none is being handled: this
			// goroutine handles them), and only up to the delivery margin:
			// every record then holds what happened before that time.
			if len(ch) == 0 {
				e.generic.cache.UpdateTime(e.generic.clock.Now().Add(-EventDeliveryMargin))
			}
			// Pods that lost an event to a full channel get a PodSync
			// (relists are rare while events flow).
			e.generic.Redeliver()
		case ev := <-ch:
			if err := e.HandleEvent(ctx, ev); err != nil && ctx.Err() == nil {
				e.log.Info("cannot handle container event; the pod will be reinspected", zap.Error(err))
			}
		}
	}
}

// EventStatusReader is a Runtime that can build a pod's status from a CRI
// container event's own sandbox and container statuses, without calling
// the runtime (kuberuntime.Manager). ok is false when the event does not
// carry enough for it.
type EventStatusReader interface {
	PodStatusFromEvent(ev *runtimeapi.ContainerEventResponse) (status *kubetypes.PodStatus, ok bool)
}

// HandleEvent applies one CRI container event: it takes the pod's status,
// stores it in the cache (stamped with the event's time; deleted if the pod
// has nothing left) and sends ContainerStarted for a start, ContainerDied for
// a stop, ContainerDied and ContainerRemoved for a deletion, nothing for a
// creation. Events older than the cached status send nothing. An event
// without a sandbox status is ignored.
//
// The status is the one the event carries (the runtime's statuses of the
// sandbox and its containers, taken as it sent the event; no CRI call) when
// the Runtime is an EventStatusReader and the event can be trusted to hold
// everything the pod has: a start, stop or creation of a container of the
// only sandbox the cache knows for the pod, which no pod worker changed in
// the EventDeliveryMargin before the event (a container made while the
// runtime put the event together would be missing from it, and a worker
// could take the status as proof that it is not there). Otherwise the pod
// is read with GetPodStatus; if that fails the pod is flagged for
// reinspection and the error (wrapping ErrRelist) returned.
func (e *EventedPLEG) HandleEvent(ctx context.Context, ev *runtimeapi.ContainerEventResponse) error {
	md := ev.GetPodSandboxStatus().GetMetadata()
	if md == nil {
		e.log.Warn("ignoring container event without a sandbox status", zap.String("container", ev.GetContainerId()))
		return nil
	}
	uid := types.UID(md.GetUid())
	ts := time.Unix(0, ev.GetCreatedAt())
	st := e.statusFromEvent(ev, uid, ts)
	if st == nil {
		var err error
		if st, err = e.rt.GetPodStatus(ctx, uid, md.GetName(), md.GetNamespace()); err != nil {
			e.generic.RequestReinspect(uid)
			return fmt.Errorf("%w: status of pod %s: %w", ErrRelist, uid, err)
		}
	}
	if st == nil {
		st = &kubetypes.PodStatus{ID: uid, Name: md.GetName(), Namespace: md.GetNamespace()}
	}
	if st.TimeStamp.IsZero() {
		st.TimeStamp = ts
	}
	e.generic.exitMu.Lock()
	st = patchExits(st, e.generic.exits)
	e.generic.exitMu.Unlock()
	st.IPs = e.generic.keepIPs(uid, st)
	id := ev.GetContainerId()
	sandbox := id != "" && id == ev.GetPodSandboxStatus().GetId()
	cache := e.generic.cache
	if ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		if len(st.ContainerStatuses) == 0 && len(st.SandboxStatuses) == 0 {
			cache.Delete(uid)
			// And the relisting PLEG's record of the pod: relists are
			// 300s apart while events flow, and a churn of pods would
			// keep that long a record of every pod it ran.
			e.generic.forgetRecord(uid)
		} else {
			cache.Set(uid, st, nil, ts)
		}
		e.generic.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerDied, Data: id, Sandbox: sandbox})
		e.generic.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerRemoved, Data: id, Sandbox: sandbox})
		return nil
	}
	if !cache.Set(uid, st, nil, ts) {
		return nil
	}
	switch ev.GetContainerEventType() {
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		e.generic.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerStarted, Data: id, Sandbox: sandbox})
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		e.generic.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerDied, Data: id, Sandbox: sandbox})
	}
	return nil
}
