package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Config configures a Source.
type Config struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName selects the pods (spec.nodeName). Required.
	NodeName string
	// Out receives a SET with the node's full pod list after every change.
	// Required.
	Out chan<- kubetypes.PodUpdate
	// Resync, if positive, makes the reflector resync its store at this
	// period (it sends nothing by itself; the kubelet uses 0). Default 0.
	Resync time.Duration
	// MaxRetryBackoff caps the wait before the reflector lists and watches
	// again after a failure (e.g. the API server is down): it starts at
	// 800ms (or MaxRetryBackoff if smaller), doubles up to this cap, and
	// gets up to 20% jitter. 0 = client-go's default, as the kubelet has it:
	// 800ms doubling to 30s with up to 100% jitter, so after a long outage
	// new pods may take a minute to be seen. Negative is an error.
	MaxRetryBackoff time.Duration
	// Clock drives the reflector's back-off and resync timers. Default
	// clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig.apiserver". The
	// reflector's own messages go to it at debug level.
	Logger *zap.Logger
}

// Source watches the API server for the pods of one node.
type Source struct {
	client   kubernetes.Interface
	nodeName string
	out      chan<- kubetypes.PodUpdate
	resync   time.Duration
	backoff  *wait.Backoff
	clock    clock.Clock
	log      *zap.Logger
	once     lifecycle.Once
}

// New validates cfg and fills its defaults. It does no I/O.
func New(cfg Config) (*Source, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig))
	}
	if cfg.Out == nil {
		errs = append(errs, fmt.Errorf("%w: Out is required", ErrInvalidConfig))
	}
	if cfg.Resync < 0 {
		errs = append(errs, fmt.Errorf("%w: Resync must not be negative", ErrInvalidConfig))
	}
	if cfg.MaxRetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxRetryBackoff must not be negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Source{
		client:   cfg.Client,
		nodeName: cfg.NodeName,
		out:      cfg.Out,
		resync:   cfg.Resync,
		backoff:  retryBackoff(cfg.MaxRetryBackoff),
		clock:    cfg.Clock,
		log:      cfg.Logger,
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("podconfig.apiserver").With(zap.String("node", s.nodeName))
	return s, nil
}

// Run lists and watches the node's pods until ctx is done, re-listing after
// errors with the reflector's back-off. It returns nil once the reflector
// has stopped. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (s *Source) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}

	selector := fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String()
	pods := s.client.CoreV1().Pods(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return pods.Watch(ctx, opts)
		},
	}, s.client)
	store := newPodStore(ctx, s.nodeName, s.out, s.log)
	logger := logr.New(&zapSink{log: s.log.Named("reflector")})
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, store, cache.ReflectorOptions{
		Name:         "podconfig-apiserver",
		ResyncPeriod: s.resync,
		Clock:        s.clock,
		Logger:       &logger,
		Backoff:      s.backoff,
	})
	s.log.Info("watching the API server for pods")
	r.RunWithContext(ctx)
	s.log.Info("stopped watching the API server")
	return nil
}

// firstRetryBackoff is client-go's first reflector back-off.
const firstRetryBackoff = 800 * time.Millisecond

// retryBackoff is the reflector back-off for a cap (nil: client-go's).
func retryBackoff(limit time.Duration) *wait.Backoff {
	if limit <= 0 {
		return nil
	}
	first := min(firstRetryBackoff, limit)
	return &wait.Backoff{
		Duration: first,
		Cap:      limit,
		Factor:   2,
		Jitter:   0.2,
		Steps:    int(limit/first) + 1,
	}
}

// podStore is the reflector's store: it keeps the pods it is given and,
// after every change that concerns the node, sends the node's full set as
// a SET, waiting for ctx so a full Out never blocks shutdown.
type podStore struct {
	ctx      context.Context
	nodeName string
	out      chan<- kubetypes.PodUpdate
	log      *zap.Logger

	mu    sync.Mutex
	inner cache.Store
}

var _ cache.ReflectorStore = (*podStore)(nil)

func newPodStore(ctx context.Context, nodeName string, out chan<- kubetypes.PodUpdate, log *zap.Logger) *podStore {
	return &podStore{
		ctx:      ctx,
		nodeName: nodeName,
		out:      out,
		log:      log,
		inner:    cache.NewStore(cache.MetaNamespaceKeyFunc),
	}
}

// ours reports whether obj is a pod bound to this node. The field selector
// already asks the server for those only; this check guards against
// servers (and fakes) that do not honour it.
func (s *podStore) ours(obj interface{}) bool {
	pod, ok := obj.(*v1.Pod)
	return ok && pod.Spec.NodeName == s.nodeName
}

// change applies op to the inner store and sends the set if obj, or the
// object it replaces, belongs to the node.
func (s *podStore) change(obj interface{}, op func(interface{}) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	relevant := s.ours(obj)
	if !relevant {
		if old, exists, err := s.inner.Get(obj); err == nil && exists {
			relevant = s.ours(old)
		}
	}
	if err := op(obj); err != nil {
		return err
	}
	if !relevant {
		return nil
	}
	return s.sendLocked()
}

func (s *podStore) Add(obj interface{}) error    { return s.change(obj, s.inner.Add) }
func (s *podStore) Update(obj interface{}) error { return s.change(obj, s.inner.Update) }
func (s *podStore) Delete(obj interface{}) error { return s.change(obj, s.inner.Delete) }

// Replace is the reflector's (re-)list: the set is always sent, empty or
// not, so the first list marks the source as seen.
func (s *podStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.inner.Replace(list, rv); err != nil {
		return err
	}
	return s.sendLocked()
}

func (s *podStore) Resync() error { return nil }

func (s *podStore) sendLocked() error {
	objs := s.inner.List()
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if s.ours(o) {
			pods = append(pods, o.(*v1.Pod))
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	select {
	case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.SourceAPI}:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// zapSink routes the reflector's logr messages to zap: info at debug
// level, errors at warn level.
type zapSink struct {
	log *zap.Logger
}

func (z *zapSink) Init(logr.RuntimeInfo) {}

func (z *zapSink) Enabled(level int) bool { return z.log.Core().Enabled(zap.DebugLevel) }

func (z *zapSink) Info(level int, msg string, kv ...interface{}) {
	z.log.Debug(msg, kvFields(kv)...)
}

func (z *zapSink) Error(err error, msg string, kv ...interface{}) {
	z.log.Warn(msg, append(kvFields(kv), zap.Error(err))...)
}

func (z *zapSink) WithValues(kv ...interface{}) logr.LogSink {
	return &zapSink{log: z.log.With(kvFields(kv)...)}
}

func (z *zapSink) WithName(name string) logr.LogSink {
	return &zapSink{log: z.log.Named(name)}
}

func kvFields(kv []interface{}) []zap.Field {
	fs := make([]zap.Field, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		fs = append(fs, zap.Any(key, kv[i+1]))
	}
	return fs
}
