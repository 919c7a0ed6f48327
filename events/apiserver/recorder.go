package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults, as the kubelet configures its events (eventRecordQPS,
// eventBurst) plus the bounds of this recorder.
const (
	DefaultComponent    = "kubelet"
	DefaultQPS          = 50
	DefaultBurst        = 100
	DefaultQueueSize    = 1000
	DefaultMaxAge       = time.Minute
	DefaultCallTimeout  = 10 * time.Second
	DefaultRetryBackoff = time.Second
	DefaultMaxBackoff   = 30 * time.Second
)

// Reasons an event is dropped (the reason label of
// nodekit_events_dropped_total).
const (
	// DropQueueFull: the queue was full when the event was recorded.
	DropQueueFull = "queue_full"
	// DropTooOld: the event waited longer than MaxAge (an outage).
	DropTooOld = "too_old"
	// DropFiltered: client-go's spam filter held it back.
	DropFiltered = "filtered"
	// DropSendFailed: its one write failed (the API server unreachable,
	// too slow, or failing); the sender then backs off.
	DropSendFailed = "send_failed"
	// DropRejected: the API server refused it (invalid, forbidden, its
	// namespace terminating); no back-off.
	DropRejected = "rejected"
	// DropNoReference: its object has no reference (kubetypes.ObjectRef).
	DropNoReference = "no_reference"
)

var dropReasons = []string{DropQueueFull, DropTooOld, DropFiltered, DropSendFailed, DropRejected, DropNoReference}

// Config configures a Recorder.
type Config struct {
	// Client writes the events (required).
	Client kubernetes.Interface
	// NodeName is the events' source host and reporting instance
	// (required).
	NodeName string
	// Component is the events' source component and reporting controller
	// (default "kubelet").
	Component string
	// QPS and Burst bound the writes to the API server (default 50 and
	// 100: the kubelet's eventRecordQPS and eventBurst).
	QPS   float64
	Burst int
	// QueueSize bounds the events waiting to be written (default 1000);
	// past it events are dropped.
	QueueSize int
	// MaxAge: an event older than this when its turn comes is dropped, so
	// that an agent that was offline sends no backlog (default 1m).
	MaxAge time.Duration
	// CallTimeout bounds one write (default 10s).
	CallTimeout time.Duration
	// RetryBackoff and MaxBackoff: after a failed write the sender waits
	// RetryBackoff, doubling up to MaxBackoff while writes keep failing
	// (defaults 1s and 30s).
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// Correlator replaces client-go's correlator options (default: the
	// kubelet's, client-go's defaults: 10 similar events in 10 minutes
	// aggregated, a spam filter of 25 events and then one per 5 minutes
	// per object and type). Its Clock is set to Clock.
	Correlator record.CorrelatorOptions

	Clock  clock.WithTicker
	Logger *zap.Logger
	// Registerer, if set, gets nodekit_events_dropped_total{reason} and
	// nodekit_events_sent_total.
	Registerer prometheus.Registerer
}

// Recorder is a kubetypes.EventRecorder that writes events to the API
// server (see the package documentation). Event and Eventf never block:
// they put the event on a bounded queue that Run drains.
type Recorder struct {
	cfg        Config
	clk        clock.WithTicker
	log        *zap.Logger
	correlator *record.EventCorrelator
	queue      chan *v1.Event
	once       lifecycle.Once

	dropped    map[string]*atomic.Uint64
	sent       atomic.Uint64
	droppedVec *prometheus.CounterVec
	sentCtr    prometheus.Counter
	// overflowing: drops for a full queue are being logged already.
	overflowing atomic.Bool

	// Sender state (Run's goroutine only).
	bucket  tokenBucket
	backoff time.Duration

	mu sync.Mutex // guards lastNano
	// lastNano makes event names unique within one instant.
	lastNano int64
}

var _ kubetypes.EventRecorder = (*Recorder)(nil)

// New validates cfg and fills defaults. It starts nothing and does no I/O.
func New(cfg Config) (*Recorder, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if cfg.Client == nil {
		bad("Client is required")
	}
	if cfg.NodeName == "" {
		bad("NodeName is required")
	}
	for _, d := range []struct {
		name string
		v    float64
	}{{"QPS", cfg.QPS}, {"Burst", float64(cfg.Burst)}, {"QueueSize", float64(cfg.QueueSize)},
		{"MaxAge", float64(cfg.MaxAge)}, {"CallTimeout", float64(cfg.CallTimeout)},
		{"RetryBackoff", float64(cfg.RetryBackoff)}, {"MaxBackoff", float64(cfg.MaxBackoff)}} {
		if d.v < 0 {
			bad("%s is negative", d.name)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Component == "" {
		cfg.Component = DefaultComponent
	}
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.RetryBackoff {
		cfg.MaxBackoff = cfg.RetryBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	opts := cfg.Correlator
	opts.Clock = cfg.Clock
	r := &Recorder{
		cfg:        cfg,
		clk:        cfg.Clock,
		log:        cfg.Logger.Named("events"),
		correlator: record.NewEventCorrelatorWithOptions(opts),
		queue:      make(chan *v1.Event, cfg.QueueSize),
		dropped:    make(map[string]*atomic.Uint64, len(dropReasons)),
		bucket:     tokenBucket{qps: cfg.QPS, burst: float64(cfg.Burst), tokens: float64(cfg.Burst)},
	}
	for _, reason := range dropReasons {
		r.dropped[reason] = new(atomic.Uint64)
	}
	if cfg.Registerer != nil {
		r.droppedVec = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodekit_events_dropped_total",
			Help: "Events not written to the API server, by reason (queue_full, too_old, filtered, send_failed, rejected, no_reference).",
		}, []string{"reason"})
		r.sentCtr = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodekit_events_sent_total",
			Help: "Events written to the API server (created or patched).",
		})
		for _, c := range []prometheus.Collector{r.droppedVec, r.sentCtr} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalidConfig, err)
			}
		}
		for _, reason := range dropReasons {
			r.droppedVec.WithLabelValues(reason)
		}
	}
	return r, nil
}

// Event queues an event about obj; it never blocks.
func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.enqueue(obj, eventtype, reason, message)
}

// Eventf queues an event with a formatted message; it never blocks.
func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	msg := messageFmt
	if len(args) > 0 {
		msg = fmt.Sprintf(messageFmt, args...)
	}
	r.enqueue(obj, eventtype, reason, msg)
}

func (r *Recorder) enqueue(obj runtime.Object, eventtype, reason, message string) {
	ref, err := kubetypes.ObjectRef(obj)
	if err != nil {
		r.drop(DropNoReference)
		r.log.Debug("event dropped: no object reference", zap.String("reason", reason), zap.Error(err))
		return
	}
	now := metav1.NewTime(r.clk.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: r.name(ref.Name, now.Time), Namespace: ns},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventtype,
		Source:              v1.EventSource{Component: r.cfg.Component, Host: r.cfg.NodeName},
		ReportingController: r.cfg.Component,
		ReportingInstance:   r.cfg.NodeName,
	}
	select {
	case r.queue <- e:
	default:
		r.drop(DropQueueFull)
		if r.overflowing.CompareAndSwap(false, true) {
			r.log.Warn("event queue full: dropping events until the API server takes them again",
				zap.Int("queue", r.cfg.QueueSize), zap.String("reason", reason), zap.String("object", ref.Kind+"/"+ref.Name))
		}
	}
}

// name is the event's name, as client-go's: <object>.<nanoseconds in
// hex>, kept unique when two events fall on one instant.
func (r *Recorder) name(object string, now time.Time) string {
	r.mu.Lock()
	n := now.UnixNano()
	if n <= r.lastNano {
		n = r.lastNano + 1
	}
	r.lastNano = n
	r.mu.Unlock()
	return fmt.Sprintf("%v.%x", object, n)
}

func (r *Recorder) drop(reason string) {
	r.dropped[reason].Add(1)
	if r.droppedVec != nil {
		r.droppedVec.WithLabelValues(reason).Inc()
	}
}

// Dropped is how many events were dropped for reason (one of the Drop*
// constants).
func (r *Recorder) Dropped(reason string) uint64 {
	if c, ok := r.dropped[reason]; ok {
		return c.Load()
	}
	return 0
}

// Sent is how many events were written (created or patched).
func (r *Recorder) Sent() uint64 { return r.sent.Load() }

// Queued is how many events wait to be written.
func (r *Recorder) Queued() int { return len(r.queue) }

// Run writes the queued events until ctx ends, one at a time: each gets
// one try. It returns nil when ctx ends (events still queued are left).
func (r *Recorder) Run(ctx context.Context) error {
	if err := r.once.Start(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-r.queue:
			r.handle(ctx, e)
		}
	}
}

// handle is one event's turn: age check, correlation, rate limit, one
// write; a failed write drops the event and backs off.
func (r *Recorder) handle(ctx context.Context, e *v1.Event) {
	if age := r.clk.Since(e.LastTimestamp.Time); age > r.cfg.MaxAge {
		r.drop(DropTooOld)
		return
	}
	res, err := r.correlator.EventCorrelate(e)
	if err != nil {
		r.drop(DropRejected)
		r.log.Info("event not correlated; dropped", zap.String("reason", e.Reason), zap.Error(err))
		return
	}
	if res.Skip {
		r.drop(DropFiltered)
		return
	}
	if !r.waitToken(ctx) {
		return
	}
	err = r.write(ctx, res.Event, res.Patch)
	switch {
	case err == nil:
		r.sent.Add(1)
		if r.sentCtr != nil {
			r.sentCtr.Inc()
		}
		r.backoff = 0
		r.overflowing.Store(false)
	case ctx.Err() != nil:
	case rejected(err):
		r.drop(DropRejected)
		r.log.Info("the API server rejected an event; dropped", zap.String("reason", e.Reason), zap.Error(err))
	default:
		r.drop(DropSendFailed)
		if r.backoff == 0 {
			r.backoff = r.cfg.RetryBackoff
		} else {
			r.backoff = min(2*r.backoff, r.cfg.MaxBackoff)
		}
		r.log.Warn("writing an event failed; dropped, backing off", zap.String("reason", e.Reason),
			zap.Duration("backoff", r.backoff), zap.Error(err))
		t := r.clk.NewTimer(r.backoff)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
	}
}

// write creates the event, or patches the one it aggregates into (and
// creates it if that one is gone), and tells the correlator what the API
// server stored.
func (r *Recorder) write(ctx context.Context, e *v1.Event, patch []byte) error {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	events := r.cfg.Client.CoreV1().Events(e.Namespace)
	var stored *v1.Event
	var err error
	update := e.Count > 1
	if update {
		stored, err = events.Patch(cctx, e.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	if !update || apierrors.IsNotFound(err) {
		create := e.DeepCopy()
		create.ResourceVersion = ""
		stored, err = events.Create(cctx, create, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	r.correlator.UpdateState(stored)
	return nil
}

// rejected: the API server answered and refused the event; trying again
// would give the same answer.
func rejected(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	return apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) ||
		apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause)
}

// waitToken waits for a write token (QPS, Burst); false if ctx ended.
func (r *Recorder) waitToken(ctx context.Context) bool {
	for {
		wait := r.bucket.take(r.clk.Now())
		if wait <= 0 {
			return true
		}
		t := r.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// tokenBucket is a token bucket on an injected clock: qps tokens a second
// up to burst.
type tokenBucket struct {
	qps, burst, tokens float64
	last               time.Time
}

// take takes a token at now and returns 0, or returns how long to wait
// for one.
func (b *tokenBucket) take(now time.Time) time.Duration {
	if !b.last.IsZero() {
		if d := now.Sub(b.last).Seconds(); d > 0 {
			b.tokens = min(b.burst, b.tokens+d*b.qps)
		}
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.qps * float64(time.Second))
}
