package podconfig

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Mode is how PodConfig notifies its consumer of changes.
type Mode int

const (
	// Incremental (the default) delivers the per-source diff, as the kubelet
	// does: REMOVE, ADD, UPDATE, DELETE, then RECONCILE, each only when it
	// has pods, plus an empty ADD on a source's first SET when no ADD,
	// UPDATE or DELETE was delivered for it (so the consumer learns the
	// source is ready).
	Incremental Mode = iota
	// Snapshot delivers, on every change (including status-only changes) and
	// on each source's first SET, one SET with every pod of every source
	// (Source SourceAll).
	Snapshot
	// SnapshotAndUpdates delivers a SET of every pod of every source when
	// pods were added or removed (or on a source's first SET), followed by
	// UPDATE, DELETE and RECONCILE for the pods that changed in place.
	SnapshotAndUpdates
)

func (m Mode) String() string {
	switch m {
	case Incremental:
		return "Incremental"
	case Snapshot:
		return "Snapshot"
	case SnapshotAndUpdates:
		return "SnapshotAndUpdates"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// DefaultUpdatesBuffer is the capacity of the Updates channel when
// Config.UpdatesBuffer is 0 (the kubelet's).
const DefaultUpdatesBuffer = 50

// Config configures a PodConfig.
type Config struct {
	// Mode is the notification mode; the zero value is Incremental.
	Mode Mode
	// Sources are the names of the sources that must each deliver a SET
	// before SeenAllSources reports true. Channel adds any other name it is
	// given to this set.
	Sources []string
	// Clock stamps the config.seen annotation. Default clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig".
	Logger *zap.Logger
	// Registerer, if not nil, receives the package's metrics.
	Registerer prometheus.Registerer
	// UpdatesBuffer is the capacity of the Updates channel; 0 means
	// DefaultUpdatesBuffer.
	UpdatesBuffer int
}

// PodConfig merges the pods of every source into one ordered stream of
// PodUpdates. See the package documentation.
type PodConfig struct {
	mode    Mode
	clock   clock.Clock
	log     *zap.Logger
	metrics *metrics
	updates chan kubetypes.PodUpdate

	mu       sync.Mutex // guards everything below and the merge itself
	sources  map[string]*sourceState
	owners   map[types.UID]uidOwner // every stored UID: one source, one namespace/name
	refused  uint64                 // pods refused for a UID conflict
	required []string               // sources SeenAllSources waits for, in order of addition
	channels map[string]chan kubetypes.PodUpdate
	fp       *fingerprinter
	scratch  mergeScratch
	once     lifecycle.Once
	running  bool
	runCtx   context.Context
	wg       sync.WaitGroup
	ready    chan struct{}
	isReady  bool

	in      chan sourced  // forwarders → merge goroutine
	syncReq chan struct{} // Sync requests (capacity 1)
}

type sourced struct {
	source string
	update kubetypes.PodUpdate
}

// New validates cfg and returns a PodConfig. It starts nothing.
func New(cfg Config) (*PodConfig, error) {
	var bad problems
	switch cfg.Mode {
	case Incremental, Snapshot, SnapshotAndUpdates:
	default:
		bad.add("Mode: unknown mode %d", int(cfg.Mode))
	}
	if cfg.UpdatesBuffer < 0 {
		bad.add("UpdatesBuffer: %d is negative", cfg.UpdatesBuffer)
	}
	for i, s := range cfg.Sources {
		if s == "" {
			bad.add("Sources[%d]: empty source name: %w", i, ErrInvalidSource)
		}
	}
	if err := bad.err(); err != nil {
		return nil, err
	}
	if cfg.UpdatesBuffer == 0 {
		cfg.UpdatesBuffer = DefaultUpdatesBuffer
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	c := &PodConfig{
		mode:     cfg.Mode,
		clock:    cfg.Clock,
		log:      cfg.Logger.Named("podconfig"),
		updates:  make(chan kubetypes.PodUpdate, cfg.UpdatesBuffer),
		sources:  make(map[string]*sourceState),
		owners:   make(map[types.UID]uidOwner),
		channels: make(map[string]chan kubetypes.PodUpdate),
		fp:       newFingerprinter(),
		ready:    make(chan struct{}),
		in:       make(chan sourced),
		syncReq:  make(chan struct{}, 1),
	}
	for _, s := range cfg.Sources {
		if !slices.Contains(c.required, s) {
			c.required = append(c.required, s)
		}
	}
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer)
		if err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
		c.metrics = m
	}
	return c, nil
}

// Channel returns the channel a source sends its PodUpdates into. The same
// name always gives the same channel. An empty name is an error wrapping
// ErrInvalidSource; a name not in Config.Sources is added to the sources
// SeenAllSources waits for. Channels may be created before or after Run
// starts. A source may close its channel when it is done; its pods stay.
func (c *PodConfig) Channel(source string) (chan<- kubetypes.PodUpdate, error) {
	if source == "" {
		return nil, fmt.Errorf("%w: empty source name", ErrInvalidSource)
	}
	if source == kubetypes.SourceAll {
		return nil, fmt.Errorf("%w: %q is reserved", ErrInvalidSource, kubetypes.SourceAll)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.channels[source]; ok {
		return ch, nil
	}
	ch := make(chan kubetypes.PodUpdate)
	c.channels[source] = ch
	if !slices.Contains(c.required, source) {
		c.required = append(c.required, source)
		c.isReady = false
	}
	if c.running {
		c.startForwarderLocked(source, ch)
	}
	return ch, nil
}

// Updates is the stream of merged updates. It is closed when Run returns.
func (c *PodConfig) Updates() <-chan kubetypes.PodUpdate { return c.updates }

// Merge applies update u from source synchronously and returns the
// PodUpdates it gives rise to (in delivery order) without delivering them.
// Run uses it for every update it receives; tests call it directly. The
// pods in u are handed over (the caller must not modify them afterwards)
// and are never written to; the pods in the result are the stored objects,
// shared and read-only.
func (c *PodConfig) Merge(source string, u kubetypes.PodUpdate) []kubetypes.PodUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.mergeLocked(source, u)
	out := c.shapeLocked(source, d)
	c.checkReadyLocked()
	return out
}

// Snapshot returns every pod of every source as one SET (Source SourceAll).
// The pods are shared: treat them as read-only.
func (c *PodConfig) Snapshot() kubetypes.PodUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// Sync asks Run to deliver the full state as one SET (Source SourceAll),
// in order with the other updates. It does not block; requests made while
// one is pending are folded into it; a request made before Run starts is
// delivered when it does.
func (c *PodConfig) Sync() {
	select {
	case c.syncReq <- struct{}{}:
	default:
	}
}

// MergedState returns every stored pod (shared: treat them as read-only):
// sources in name order, each source's pods in the order it last sent them.
func (c *PodConfig) MergedState() []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mergedLocked()
}

// Refused returns how many pods the merge has refused because their UID
// was already stored for another source or another namespace/name (each
// refusal is logged with an error wrapping ErrUIDConflict, and counted in
// nodekit_podconfig_pods_refused_total).
func (c *PodConfig) Refused() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Seen reports whether source has delivered at least one SET (an empty one
// counts). Incremental ops (ADD, UPDATE, REMOVE, ...) do not make a source
// seen: they do not say what its complete set is.
func (c *PodConfig) Seen(source string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sources[source]
	return st != nil && st.seen
}

// SeenAllSources reports whether every source in Config.Sources, and every
// source given to Channel, has been Seen. With no such source it is true.
func (c *PodConfig) SeenAllSources() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allSeenLocked()
}

// SourcesReady returns the sources that have been seen and whether that is
// all of them.
func (c *PodConfig) SourcesReady() (seen []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.required {
		if st := c.sources[s]; st != nil && st.seen {
			seen = append(seen, s)
		}
	}
	return seen, len(seen) == len(c.required)
}

// Ready is closed the first time SeenAllSources becomes true. (A source
// added through Channel afterwards does not reopen it: use SeenAllSources.)
func (c *PodConfig) Ready() <-chan struct{} { return c.ready }

func (c *PodConfig) allSeenLocked() bool {
	for _, s := range c.required {
		if st := c.sources[s]; st == nil || !st.seen {
			return false
		}
	}
	return true
}

func (c *PodConfig) checkReadyLocked() {
	if c.isReady || !c.allSeenLocked() {
		return
	}
	c.isReady = true
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
}

// Run merges updates from every source channel, one at a time, and delivers
// the results on Updates in order. Delivery blocks when the consumer does
// not keep up (Updates is full): that stalls the merge, and so every source,
// which is the intended backpressure. Run returns nil once ctx is done
// and its goroutines have exited, and closes Updates. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (c *PodConfig) Run(ctx context.Context) error {
	if err := c.once.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.running = true
	c.runCtx = ctx
	for name, ch := range c.channels {
		c.startForwarderLocked(name, ch)
	}
	c.mu.Unlock()

	defer close(c.updates)
	defer c.wg.Wait()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-c.in:
			for _, u := range c.Merge(it.source, it.update) {
				if !c.deliver(ctx, u) {
					return nil
				}
			}
		case <-c.syncReq:
			if !c.deliver(ctx, c.Snapshot()) {
				return nil
			}
		}
	}
}

func (c *PodConfig) deliver(ctx context.Context, u kubetypes.PodUpdate) bool {
	select {
	case c.updates <- u:
		if c.metrics != nil {
			c.metrics.delivered.WithLabelValues(u.Op.String()).Inc()
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// startForwarderLocked starts the goroutine that moves one source's updates
// into the merge goroutine, preserving their order.
func (c *PodConfig) startForwarderLocked(source string, ch chan kubetypes.PodUpdate) {
	ctx := c.runCtx
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-ch:
				if !ok {
					return
				}
				select {
				case c.in <- sourced{source: source, update: u}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
}

type metrics struct {
	delivered *prometheus.CounterVec
	pods      *prometheus.GaugeVec
	refused   *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "podconfig", Name: "updates_delivered_total",
			Help: "PodUpdates delivered on Updates, by op.",
		}, []string{"op"}),
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodekit", Subsystem: "podconfig", Name: "pods",
			Help: "Pods currently known, by source.",
		}, []string{"source"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "podconfig", Name: "pods_refused_total",
			Help: "Pods refused by the merge, by source and reason (uid_conflict: the UID belongs to another source or namespace/name).",
		}, []string{"source", "reason"}),
	}
	for _, col := range []prometheus.Collector{m.delivered, m.pods, m.refused} {
		if err := r.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}
