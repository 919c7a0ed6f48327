package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of Config.
const (
	DefaultRelistPeriod        = time.Second
	DefaultRelistThreshold     = 3 * time.Minute
	DefaultChannelCapacity     = 1000
	DefaultRelistQueueCapacity = 200
)

// Config configures a GenericPLEG. Only Runtime is required.
type Config struct {
	// Runtime lists pods and reads pod statuses. Required.
	Runtime Runtime
	// Cache receives the pod statuses; nil creates one (see Cache()).
	Cache *Cache
	// RelistPeriod is the pause between the end of one relist and the start
	// of the next (default 1s).
	RelistPeriod time.Duration
	// RelistThreshold is how old the last successful relist may be before
	// Healthy reports false (default 3m). Must exceed RelistPeriod.
	RelistThreshold time.Duration
	// ChannelCapacity is the capacity of the Watch channel (default 1000).
	ChannelCapacity int
	// RelistQueueCapacity bounds the queue of RequestRelist calls (default 200).
	RelistQueueCapacity int
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Logger defaults to zap.NewNop(); it is named "pleg".
	Logger *zap.Logger
	// Registerer, if not nil, receives the PLEG metrics.
	Registerer prometheus.Registerer
}

// GenericPLEG turns periodic listings of the runtime into pod lifecycle
// events and keeps a Cache of pod statuses up to date. Create it with New.
//
// Relist, RelistPod, RequestReinspect, RequestRelist, Healthy and Watch are
// safe for concurrent use; relists are serialised.
type GenericPLEG struct {
	rt       Runtime
	cache    *Cache
	clock    clock.WithTicker
	log      *zap.Logger
	metrics  *metrics
	events   chan *kubetypes.PodLifecycleEvent
	relisted chan struct{} // closed by the first successful relist
	requests chan relistRequest
	kick     chan struct{} // a relist is wanted at once (SetRelistPeriod)
	once     lifecycle.Once
	dropped  atomic.Uint64
	// evented is set while an EventedPLEG feeds the cache: statuses are
	// then stored with their own time stamps and events are only sent when
	// the cache took the status.
	evented atomic.Bool

	mu         sync.Mutex // guards the fields below
	period     time.Duration
	threshold  time.Duration
	lastRelist time.Time
	// listing is what the last global relist listed (at lastRelist).
	listing   []*kubetypes.Pod
	reinspect map[types.UID]struct{}
	// held counts HoldPod calls not yet released, per pod.
	held map[types.UID]int
	// released is when a pod's last hold ended, kept while an EventedPLEG
	// feeds the cache and for EventDeliveryMargin after (see changedSince).
	released map[types.UID]time.Time
	// releasedPeak is released's largest size since it was made: a Go map
	// keeps its table when emptied, so the relist that empties a map that
	// grew past releasedShrinkAt replaces it.
	releasedPeak int

	relistMu sync.Mutex // serialises relists; guards the fields below
	records  map[types.UID]*podRecord
	// reinspectNow holds the reinspect flags taken for the running relist.
	reinspectNow map[types.UID]struct{}
	pending      []pendingEvent // scratch, reused between pods and relists

	// exits holds the containers whose exit the runtime's own events
	// reported (ContainerExited) while the CRI may still list them as
	// running. Written with relistMu and exitMu held; read with either.
	exitMu sync.Mutex
	exits  map[string]*exitOverride

	// redeliver holds the pods whose events were dropped (the Watch
	// channel was full): each gets a PodSync once there is room, so the
	// consumer catches up on what it missed (see Redeliver). At most
	// maxRedeliver pods; under redeliverMu.
	redeliverMu  sync.Mutex
	redeliver    map[types.UID]struct{}
	redeliverLen atomic.Int64
	// reinspectMisses counts, per reinspect flag of a pod no relist
	// lists, the relists that did not list it; under relistMu.
	reinspectMisses map[types.UID]int
}

// maxRedeliver bounds the pods remembered for a PodSync after a dropped
// event; past it the drop is only counted (the consumer's periodic sync
// covers those pods).
const maxRedeliver = 4096

// releasedShrinkAt: an emptied release-time map that held more entries
// than this is replaced by a new one (a few KB; smaller ones are kept
// rather than made again at every relist).
const releasedShrinkAt = 64

// maxReinspectMisses is how many global relists a reinspect flag waits for
// its pod to be listed before it is dropped (a pod that never appeared).
const maxReinspectMisses = 3

// exitOverride is an exit known from an event that the CRI may not show
// yet. uid is empty until a listing shows the container.
type exitOverride struct {
	uid  types.UID
	exit ContainerExit
}

// podRecord is the last pod state events were computed against (old) and the
// state seen by the running relist (current, nil if the pod is gone).
type podRecord struct {
	old, current *kubetypes.Pod
}

type pendingEvent struct {
	typ     kubetypes.EventType
	id      string
	sandbox bool
}

type relistRequest struct {
	uid types.UID
	at  time.Time
	// status, if set, is the pod's status read at at (ObservePodStatus):
	// the relist uses it instead of reading the runtime.
	status *kubetypes.PodStatus
}

// New validates cfg, fills defaults and returns a GenericPLEG. It starts
// nothing.
func New(cfg Config) (*GenericPLEG, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if cfg.Runtime == nil {
		bad("Runtime is required")
	}
	if cfg.RelistPeriod < 0 {
		bad("RelistPeriod %v is negative", cfg.RelistPeriod)
	}
	if cfg.RelistThreshold < 0 {
		bad("RelistThreshold %v is negative", cfg.RelistThreshold)
	}
	if cfg.ChannelCapacity < 0 {
		bad("ChannelCapacity %d is negative", cfg.ChannelCapacity)
	}
	if cfg.RelistQueueCapacity < 0 {
		bad("RelistQueueCapacity %d is negative", cfg.RelistQueueCapacity)
	}
	if cfg.RelistPeriod == 0 {
		cfg.RelistPeriod = DefaultRelistPeriod
	}
	if cfg.RelistThreshold == 0 {
		cfg.RelistThreshold = DefaultRelistThreshold
	}
	if cfg.RelistPeriod > 0 && cfg.RelistThreshold > 0 && cfg.RelistThreshold <= cfg.RelistPeriod {
		bad("RelistThreshold %v must exceed RelistPeriod %v", cfg.RelistThreshold, cfg.RelistPeriod)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.ChannelCapacity == 0 {
		cfg.ChannelCapacity = DefaultChannelCapacity
	}
	if cfg.RelistQueueCapacity == 0 {
		cfg.RelistQueueCapacity = DefaultRelistQueueCapacity
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Cache == nil {
		cfg.Cache = NewCache(cfg.Clock)
	}
	g := &GenericPLEG{
		rt:           cfg.Runtime,
		cache:        cfg.Cache,
		clock:        cfg.Clock,
		log:          cfg.Logger.Named("pleg"),
		events:       make(chan *kubetypes.PodLifecycleEvent, cfg.ChannelCapacity),
		relisted:     make(chan struct{}),
		requests:     make(chan relistRequest, cfg.RelistQueueCapacity),
		kick:         make(chan struct{}, 1),
		period:       cfg.RelistPeriod,
		threshold:    cfg.RelistThreshold,
		reinspect:    make(map[types.UID]struct{}),
		held:         make(map[types.UID]int),
		released:     make(map[types.UID]time.Time),
		records:      make(map[types.UID]*podRecord),
		reinspectNow: make(map[types.UID]struct{}),
		exits:        make(map[string]*exitOverride),
		redeliver:    make(map[types.UID]struct{}),

		reinspectMisses: make(map[types.UID]int),
	}
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer)
		if err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
		g.metrics = m
	}
	return g, nil
}

// Watch returns the channel events are sent on. It is never closed. Events
// that don't fit are dropped (see DroppedEvents), and the next relists
// re-detect nothing of them; instead each pod that lost an event gets a
// PodSync as soon as the channel has room again (Redeliver, after every
// global relist), so the consumer syncs it and reads its current status.
func (g *GenericPLEG) Watch() <-chan *kubetypes.PodLifecycleEvent { return g.events }

// Cache returns the cache the PLEG writes to.
func (g *GenericPLEG) Cache() *Cache { return g.cache }

// GetNewerThan is Cache().GetNewerThan: the PLEG serves as the pod status
// cache of whoever reads it (the pod workers).
func (g *GenericPLEG) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error) {
	return g.cache.GetNewerThan(ctx, uid, t)
}

// DroppedEvents returns how many events were dropped because the Watch
// channel was full.
func (g *GenericPLEG) DroppedEvents() uint64 { return g.dropped.Load() }

// LastRelist returns the start time of the last successful global relist
// (zero if none).
func (g *GenericPLEG) LastRelist() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastRelist
}

// Listing returns the pods the last successful global relist listed (all
// of them, as GetPods(ctx, true) lists them) and when that relist started;
// nil and the zero time before the first. Callers must not modify the
// pods. A consumer that can use a listing up to a relist period old (the
// sync loop's housekeeping) saves the runtime a listing of its own.
func (g *GenericPLEG) Listing() ([]*kubetypes.Pod, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.listing, g.lastRelist
}

// Relisted is closed once a relist has succeeded for the first time (from
// then on Healthy depends only on how recent the last one is). A consumer
// that waits for the PLEG to become healthy at start waits on it rather
// than polling, so that it goes on at the very instant of that relist.
func (g *GenericPLEG) Relisted() <-chan struct{} { return g.relisted }

// Healthy reports whether a global relist succeeded, and the last one started
// no longer than RelistThreshold ago. The error, wrapping ErrNotHealthy,
// says why not. It only reads: kubelet_pleg_last_seen_seconds is set by
// each successful relist.
func (g *GenericPLEG) Healthy() (bool, error) {
	g.mu.Lock()
	last, threshold := g.lastRelist, g.threshold
	g.mu.Unlock()
	if last.IsZero() {
		return false, fmt.Errorf("%w: no relist has succeeded yet", ErrNotHealthy)
	}
	if since := g.clock.Since(last); since > threshold {
		return false, fmt.Errorf("%w: last relist was %v ago; threshold is %v", ErrNotHealthy, since, threshold)
	}
	return true, nil
}

// SetRelistPeriod changes the relist period and health threshold. A running
// Run relists at once and then keeps the new period (this is how an
// EventedPLEG falls back to frequent relisting). Bad values are ignored.
func (g *GenericPLEG) SetRelistPeriod(period, threshold time.Duration) {
	if period <= 0 || threshold <= period {
		g.log.Warn("ignoring bad relist period", zap.Duration("period", period), zap.Duration("threshold", threshold))
		return
	}
	g.mu.Lock()
	g.period, g.threshold = period, threshold
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *GenericPLEG) relistPeriod() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.period
}

// RequestReinspect makes the next relist read the pod's status and send a
// PodSync for it even if none of its containers changed.
func (g *GenericPLEG) RequestReinspect(uid types.UID) {
	g.mu.Lock()
	g.reinspect[uid] = struct{}{}
	g.mu.Unlock()
}

// RequestRelist queues an on-demand relist of one pod, served by Run. The
// request is skipped if a global relist starts after it was made (that
// relist covered it). It never blocks: a full queue drops the request.
func (g *GenericPLEG) RequestRelist(uid types.UID) {
	select {
	case g.requests <- relistRequest{uid: uid, at: g.clock.Now()}:
	default:
		g.log.Warn("relist request queue is full; dropping request", zap.String("pod", string(uid)))
	}
}

// ObservePodStatus hands over a status of one pod that the caller read
// from the runtime after changing the pod (a pod worker right after its
// sync): Run relists the pod from it as RelistPod would (events, cache,
// exits reported by runtime events applied) without reading the runtime
// again. status.TimeStamp must be when the read began; a zero TimeStamp
// makes this a plain RequestRelist. The status is skipped if a global
// relist, or another read of the pod that reached the cache, began after
// it: those saw at least as much. It never blocks: a full queue drops it,
// as RequestRelist does. The PLEG keeps status (a shallow copy): the
// caller must not modify it afterwards.
func (g *GenericPLEG) ObservePodStatus(uid types.UID, status *kubetypes.PodStatus) {
	if status == nil || status.TimeStamp.IsZero() {
		g.RequestRelist(uid)
		return
	}
	cp := *status
	select {
	case g.requests <- relistRequest{uid: uid, at: status.TimeStamp, status: &cp}:
	default:
		g.log.Warn("relist request queue is full; dropping a pod status", zap.String("pod", string(uid)))
	}
}

// HoldPod tells the PLEG that the caller is changing the pod in the runtime
// (a pod worker's sync) and will read it afterwards (ObservePodStatus or
// RequestRelist): until the matching ReleasePod, global relists leave the
// pod out. They neither read it nor send its events; the first relist
// after the release (or the status handed over) compares it with the
// listing before the hold, so no change is lost. Holds nest; every HoldPod
// needs one ReleasePod.
//
// A pod worker must not take a cache time from a relist that left its pod
// out: it waits for a status at least as new as a time taken after
// ReleasePod (which every such relist began before).
func (g *GenericPLEG) HoldPod(uid types.UID) {
	g.mu.Lock()
	g.held[uid]++
	g.mu.Unlock()
}

// ReleasePod ends one HoldPod of the pod; without a hold it does nothing.
func (g *GenericPLEG) ReleasePod(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.held[uid]
	if !ok {
		return
	}
	if n <= 1 {
		delete(g.held, uid)
		if g.evented.Load() {
			g.released[uid] = g.clock.Now()
			g.releasedPeak = max(g.releasedPeak, len(g.released))
		}
	} else {
		g.held[uid] = n - 1
	}
}

// changedSince reports whether a pod worker is changing the pod in the
// runtime (HoldPod) or finished a change (its last ReleasePod) at or after
// t: a status the runtime put together before t may then miss the change.
// Release times are kept only while an EventedPLEG feeds the cache; older
// ones are dropped by the relists.
func (g *GenericPLEG) changedSince(uid types.UID, t time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[uid] > 0 {
		return true
	}
	at, ok := g.released[uid]
	return ok && !at.Before(t)
}

// Run relists at once, then again RelistPeriod after each relist ends, and
// serves RequestRelist in between (a due global relist goes first). Relist
// errors are logged and retried at the next period. It returns nil when ctx
// ends. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (g *GenericPLEG) Run(ctx context.Context) error {
	if err := g.once.Start(); err != nil {
		return err
	}

	g.globalRelist(ctx)
	timer := g.clock.NewTimer(g.relistPeriod())
	defer timer.Stop()
	relist := func() {
		g.globalRelist(ctx)
		timer.Reset(g.relistPeriod())
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		// A due global relist goes before queued single-pod requests.
		select {
		case <-timer.C():
			relist()
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			relist()
		case <-g.kick:
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
			relist()
		case req := <-g.requests:
			select {
			case <-timer.C():
				relist() // due too: it goes first and may cover req
			default:
			}
			g.serve(ctx, req)
		}
	}
}

// serve runs an on-demand relist request unless a global relist started
// after it was made. It reports whether it ran.
func (g *GenericPLEG) serve(ctx context.Context, req relistRequest) bool {
	if !req.at.After(g.LastRelist()) {
		return false
	}
	if req.status != nil {
		return g.relistPodFrom(ctx, req.uid, req.status)
	}
	if err := g.RelistPod(ctx, req.uid); err != nil && ctx.Err() == nil {
		g.log.Info("on-demand relist failed; the next relist retries", zap.String("pod", string(req.uid)), zap.Error(err))
	}
	return true
}

func (g *GenericPLEG) globalRelist(ctx context.Context) {
	if err := g.Relist(ctx); err != nil && ctx.Err() == nil {
		g.log.Error("relist failed", zap.Error(err))
	}
}

// Relist lists every pod from the runtime once, compares each container and
// sandbox with the previous listing, refreshes the cache for the pods that
// changed (or were flagged for reinspection) and sends their events. If the
// listing fails nothing changes and the error (wrapping ErrRelist) is
// returned; failures to read one pod's status are stored in the cache and
// retried by the next relist.
func (g *GenericPLEG) Relist(ctx context.Context) error {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()

	start := g.clock.Now()
	if g.metrics != nil {
		if last := g.LastRelist(); !last.IsZero() {
			g.metrics.interval.Observe(start.Sub(last).Seconds())
		}
		defer func() { g.metrics.duration.Observe(g.clock.Since(start).Seconds()) }()
	}

	pods, err := g.rt.GetPods(ctx, true)
	if err != nil {
		return fmt.Errorf("%w: list pods: %w", ErrRelist, err)
	}
	g.mu.Lock()
	if g.lastRelist.IsZero() {
		close(g.relisted)
	}
	g.lastRelist = start
	if g.metrics != nil {
		g.metrics.lastSeen.Set(float64(start.Unix()))
	}
	g.listing = pods
	// Pods held (being changed by their worker) are left out; see HoldPod.
	// The set is taken after the listing began, so a pod left out was
	// released after start.
	var held map[types.UID]int
	if len(g.held) > 0 {
		held = maps.Clone(g.held)
	}
	maps.DeleteFunc(g.released, func(_ types.UID, at time.Time) bool {
		return at.Before(start.Add(-EventDeliveryMargin))
	})
	if len(g.released) == 0 && g.releasedPeak > releasedShrinkAt {
		// Otherwise the emptied table keeps its peak size for good.
		g.released, g.releasedPeak = make(map[types.UID]time.Time), 0
	}
	for uid := range g.reinspect {
		g.reinspectNow[uid] = struct{}{}
	}
	clear(g.reinspect)
	g.mu.Unlock()

	for _, r := range g.records {
		r.current = nil
	}
	for _, p := range pods {
		if p == nil {
			continue
		}
		if r := g.records[p.ID]; r != nil {
			r.current = p
		} else {
			g.records[p.ID] = &podRecord{current: p}
		}
	}
	for uid, r := range g.records {
		if _, ok := held[uid]; ok {
			continue // its reinspect flag, if any, waits for the next relist
		}
		_, reinspect := g.reinspectNow[uid]
		if reinspect {
			delete(g.reinspectNow, uid)
		}
		g.reconcile(ctx, uid, r, start, nil, reinspect)
	}
	if len(g.exits) > 0 {
		g.settleExits("")
	}
	if len(g.reinspectNow) > 0 || len(g.reinspectMisses) > 0 {
		// Flags of pods the runtime doesn't list wait for them to appear,
		// for maxReinspectMisses relists.
		g.mu.Lock()
		for uid := range g.reinspectNow {
			if _, ok := held[uid]; ok {
				g.reinspect[uid] = struct{}{} // left out of this relist: not a miss
				continue
			}
			if n := g.reinspectMisses[uid] + 1; n < maxReinspectMisses {
				g.reinspectMisses[uid] = n
				g.reinspect[uid] = struct{}{}
			} else {
				delete(g.reinspectMisses, uid)
			}
		}
		for uid := range g.reinspectMisses {
			if _, waiting := g.reinspectNow[uid]; !waiting {
				delete(g.reinspectMisses, uid) // listed, or asked for again
			}
		}
		g.mu.Unlock()
		clear(g.reinspectNow)
	}
	// Only now is every record at least as new as start.
	g.cache.UpdateTime(start)
	g.Redeliver()
	return nil
}

// RelistPod relists one pod: it reads the pod's status, compares it with the
// last listing, refreshes the cache and sends events as Relist would for that
// pod, and marks the pod's record observed. Errors (wrapping ErrRelist) leave
// everything as it was; the next global relist covers the pod.
func (g *GenericPLEG) RelistPod(ctx context.Context, uid types.UID) error {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()

	start := g.clock.Now()
	var name, namespace string
	r := g.records[uid]
	if r != nil && r.old != nil {
		name, namespace = r.old.Name, r.old.Namespace
	}
	status, err := g.rt.GetPodStatus(ctx, uid, name, namespace)
	if err != nil {
		return fmt.Errorf("%w: status of pod %s: %w", ErrRelist, uid, err)
	}
	g.relistPodLocked(ctx, uid, r, start, status)
	return nil
}

// relistPodFrom relists one pod from a status read at status.TimeStamp
// (ObservePodStatus) unless a global relist or a record or observation of
// the pod in the cache is at least as new. It reports whether it used the
// status.
func (g *GenericPLEG) relistPodFrom(ctx context.Context, uid types.UID, status *kubetypes.PodStatus) bool {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	if !status.TimeStamp.After(g.LastRelist()) || g.cache.seenSince(uid, status.TimeStamp) {
		return false
	}
	g.relistPodLocked(ctx, uid, g.records[uid], status.TimeStamp, status)
	return true
}

// forgetRecord drops the relist record of a pod the runtime no longer has
// (an evented deletion of its last sandbox or container): the next relist
// then finds neither the pod nor a record, and sends nothing.
func (g *GenericPLEG) forgetRecord(uid types.UID) {
	g.relistMu.Lock()
	delete(g.records, uid)
	g.relistMu.Unlock()
}

// relistPodLocked is RelistPod after its read: status was read at start.
// Called with relistMu.
func (g *GenericPLEG) relistPodLocked(ctx context.Context, uid types.UID, r *podRecord, start time.Time, status *kubetypes.PodStatus) {
	// The record is the CRI's own view, as a global relist's is; exits
	// reported by events apply to the events and the cached status only,
	// so that settleExits keeps them until the CRI shows them too.
	cur := podFromStatus(uid, status)
	status = patchExits(status, g.exits)
	if r == nil {
		if cur == nil {
			g.cache.SetObservedTime(uid, start)
			return
		}
		r = &podRecord{}
		g.records[uid] = r
	}
	r.current = cur
	g.mu.Lock()
	_, reinspect := g.reinspect[uid]
	delete(g.reinspect, uid)
	g.mu.Unlock()
	if cur == nil {
		status = nil // the pod is gone: reconcile deletes its record
	}
	g.reconcile(ctx, uid, r, start, status, reinspect)
	g.cache.SetObservedTime(uid, start)
	if len(g.exits) > 0 {
		g.settleExits(uid)
	}
}

// reconcile computes the events of one pod from r.old to r.current and, if
// there are any or reinspect is set, refreshes the cache (with status if
// given, else by asking the runtime) and sends them. Called with relistMu.
func (g *GenericPLEG) reconcile(ctx context.Context, uid types.UID, r *podRecord, ts time.Time, status *kubetypes.PodStatus, reinspect bool) {
	var exits map[string]*exitOverride
	if len(g.exits) > 0 {
		exits = g.exits
	}
	g.pending = appendPodEvents(g.pending[:0], r.old, r.current, exits)
	if len(g.pending) == 0 && !reinspect {
		if r.current == nil {
			delete(g.records, uid)
			g.cache.Delete(uid)
		} else {
			r.old = r.current
		}
		return
	}

	updated := true
	if r.current == nil {
		g.log.Debug("pod is gone; deleting its status", zap.String("pod", string(uid)))
		g.cache.Delete(uid)
	} else {
		if status == nil {
			var err error
			status, err = g.rt.GetPodStatus(ctx, uid, r.current.Name, r.current.Namespace)
			if err != nil {
				g.log.Info("cannot read pod status; will retry at the next relist",
					zap.String("pod", r.current.Namespace+"/"+r.current.Name), zap.String("uid", string(uid)), zap.Error(err))
				g.cache.Set(uid, status, err, ts)
				g.RequestReinspect(uid)
				return // the record stays old: the same events come again
			}
			if status == nil {
				status = &kubetypes.PodStatus{ID: uid, Name: r.current.Name, Namespace: r.current.Namespace}
			}
			status = patchExits(status, exits)
		}
		if status.TimeStamp.IsZero() {
			status.TimeStamp = ts
		}
		status.IPs = g.keepIPs(uid, status)
		stamp := ts
		if g.evented.Load() {
			stamp = status.TimeStamp
		}
		updated = g.cache.Set(uid, status, nil, stamp)
	}
	if !updated && g.evented.Load() {
		return // the cache holds newer data from events; try again next time
	}

	if r.current == nil {
		delete(g.records, uid)
	} else {
		r.old = r.current
	}
	if len(g.pending) == 0 {
		g.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.PodSync})
		return
	}
	for _, e := range g.pending {
		if e.typ == kubetypes.ContainerChanged {
			continue // not reliable; nobody uses it (as in the kubelet)
		}
		if e.typ == kubetypes.ContainerDied && status != nil && g.log.Core().Enabled(zap.DebugLevel) {
			for _, cs := range status.ContainerStatuses {
				if cs != nil && cs.ID == e.id {
					g.log.Debug("container finished", zap.String("pod", string(uid)), zap.String("container", e.id), zap.Int32("exitCode", cs.ExitCode))
				}
			}
		}
		g.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: e.typ, Data: e.id, Sandbox: e.sandbox})
	}
}

func (g *GenericPLEG) send(e *kubetypes.PodLifecycleEvent) {
	select {
	case g.events <- e:
	default:
		g.dropped.Add(1)
		if g.metrics != nil {
			g.metrics.discarded.Inc()
		}
		g.log.Error("event channel is full; dropping event (the pod gets a PodSync once there is room)",
			zap.String("pod", string(e.ID)), zap.String("type", string(e.Type)))
		g.redeliverMu.Lock()
		if _, ok := g.redeliver[e.ID]; !ok && len(g.redeliver) < maxRedeliver {
			g.redeliver[e.ID] = struct{}{}
			g.redeliverLen.Add(1)
		}
		g.redeliverMu.Unlock()
	}
}

// Redeliver sends a PodSync for each pod that lost an event to a full
// channel, as long as the channel has room; the pods that still don't fit
// wait for the next call. Relist calls it after every global relist (and
// EventedPLEG on its cache ticks); it never blocks.
func (g *GenericPLEG) Redeliver() {
	if g.redeliverLen.Load() == 0 {
		return
	}
	g.redeliverMu.Lock()
	defer g.redeliverMu.Unlock()
	for uid := range g.redeliver {
		select {
		case g.events <- &kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.PodSync}:
			delete(g.redeliver, uid)
			g.redeliverLen.Add(-1)
		default:
			return
		}
	}
}

// keepIPs returns the IPs to store for a pod: the new ones, or, if there are
// none and no sandbox is ready (the pod was torn down), the cached ones, so a
// finished pod keeps reporting its IP.
func (g *GenericPLEG) keepIPs(uid types.UID, status *kubetypes.PodStatus) []string {
	if len(status.IPs) > 0 {
		return status.IPs
	}
	old, err := g.cache.Get(uid)
	if err != nil || old == nil || len(old.IPs) == 0 {
		return status.IPs
	}
	for _, sb := range status.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	return old.IPs
}

// plegState is a container state as event generation sees it.
type plegState uint8

const (
	stateNonExistent plegState = iota
	stateUnknown               // created, unknown or anything unrecognised
	stateRunning
	stateExited
)

func toPLEGState(s kubetypes.ContainerState) plegState {
	switch s {
	case kubetypes.ContainerStateRunning:
		return stateRunning
	case kubetypes.ContainerStateExited:
		return stateExited
	}
	return stateUnknown
}

// stateOf is the state of c, exited if an event said so (exits may be nil).
func stateOf(c *kubetypes.Container, exits map[string]*exitOverride) plegState {
	s := toPLEGState(c.State)
	if s != stateExited && exits != nil {
		if _, ok := exits[c.ID]; ok {
			return stateExited
		}
	}
	return s
}

// stateIn returns the state of the container or sandbox id in p. The entry
// is looked for first at index hint of the same list (listings usually keep
// their order), then everywhere.
func stateIn(p *kubetypes.Pod, id string, sandbox bool, hint int, exits map[string]*exitOverride) plegState {
	if p == nil {
		return stateNonExistent
	}
	list := p.Containers
	if sandbox {
		list = p.Sandboxes
	}
	if hint < len(list) && list[hint] != nil && list[hint].ID == id {
		return stateOf(list[hint], exits)
	}
	for _, c := range p.Containers {
		if c != nil && c.ID == id {
			return stateOf(c, exits)
		}
	}
	for _, c := range p.Sandboxes {
		if c != nil && c.ID == id {
			return stateOf(c, exits)
		}
	}
	return stateNonExistent
}

// appendPodEvents appends the events of every container and sandbox of old
// and cur (old ones first), counting the containers in exits (may be nil)
// as exited on both sides. It allocates nothing when dst has room.
func appendPodEvents(dst []pendingEvent, old, cur *kubetypes.Pod, exits map[string]*exitOverride) []pendingEvent {
	if old != nil {
		for k, list := range [2][]*kubetypes.Container{old.Containers, old.Sandboxes} {
			for i, c := range list {
				if c != nil {
					dst = appendTransition(dst, c.ID, k == 1, stateOf(c, exits), stateIn(cur, c.ID, k == 1, i, exits))
				}
			}
		}
	}
	if cur != nil {
		for k, list := range [2][]*kubetypes.Container{cur.Containers, cur.Sandboxes} {
			for i, c := range list {
				if c != nil && stateIn(old, c.ID, k == 1, i, nil) == stateNonExistent {
					dst = appendTransition(dst, c.ID, k == 1, stateNonExistent, stateOf(c, exits))
				}
			}
		}
	}
	return dst
}

func appendTransition(dst []pendingEvent, id string, sandbox bool, from, to plegState) []pendingEvent {
	if from == to {
		return dst
	}
	switch to {
	case stateRunning:
		return append(dst, pendingEvent{kubetypes.ContainerStarted, id, sandbox})
	case stateExited:
		return append(dst, pendingEvent{kubetypes.ContainerDied, id, sandbox})
	case stateUnknown:
		return append(dst, pendingEvent{kubetypes.ContainerChanged, id, sandbox})
	}
	// Gone. If it was seen exited, its death was already reported.
	if from == stateExited {
		return append(dst, pendingEvent{kubetypes.ContainerRemoved, id, sandbox})
	}
	return append(dst, pendingEvent{kubetypes.ContainerDied, id, sandbox}, pendingEvent{kubetypes.ContainerRemoved, id, sandbox})
}

// podFromStatus builds the runtime pod a listing would show from a pod
// status; nil if the status holds neither containers nor sandboxes.
func podFromStatus(uid types.UID, s *kubetypes.PodStatus) *kubetypes.Pod {
	if s == nil || (len(s.ContainerStatuses) == 0 && len(s.SandboxStatuses) == 0) {
		return nil
	}
	p := &kubetypes.Pod{ID: uid, Name: s.Name, Namespace: s.Namespace}
	for _, cs := range s.ContainerStatuses {
		if cs == nil {
			continue
		}
		p.Containers = append(p.Containers, &kubetypes.Container{
			ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, ImageRef: cs.ImageRef,
			Hash: cs.Hash, State: cs.State, CreatedAt: cs.CreatedAt.UnixNano(), Type: cs.Type, GracePeriod: cs.GracePeriod,
		})
	}
	for _, sb := range s.SandboxStatuses {
		if sb == nil {
			continue
		}
		st := kubetypes.ContainerStateExited
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = kubetypes.ContainerStateRunning
		}
		p.Sandboxes = append(p.Sandboxes, &kubetypes.Container{
			ID: sb.GetId(), Name: sb.GetMetadata().GetName(), State: st, CreatedAt: sb.GetCreatedAt(),
		})
		if sb.GetCreatedAt() > p.CreatedAt {
			p.CreatedAt = sb.GetCreatedAt()
		}
	}
	return p
}

type metrics struct {
	duration  prometheus.Histogram
	interval  prometheus.Histogram
	discarded prometheus.Counter
	lastSeen  prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		interval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help: "Interval in seconds between the starts of two relists in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		discarded: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "pleg_discard_events",
			Help: "The number of events PLEG dropped because the event channel was full.",
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "Unix time in seconds when PLEG last relisted successfully.",
		}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.interval, m.discarded, m.lastSeen} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
