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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// SharedConfig configures a Shared pod watch.
type SharedConfig struct {
	// Client talks to the API server with an identity that may list and
	// watch the pods of every node (a node's own credential may not).
	// Required.
	Client kubernetes.Interface
	// FieldSelector selects the pods watched; default "spec.nodeName!=",
	// every pod bound to a node. Pods of nodes nobody asked for are kept
	// (so a node started later gets its pods at once) but sent nowhere.
	FieldSelector string
	// LabelSelector, if set, narrows the pods watched further.
	LabelSelector string
	// MaxRetryBackoff caps the wait before listing and watching again
	// after a failure, as Config.MaxRetryBackoff.
	MaxRetryBackoff time.Duration
	// Clock drives the reflector's back-off timers. Default
	// clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig.apiserver.shared".
	Logger *zap.Logger
}

// Shared watches the pods of many nodes with one list and watch, indexed
// by spec.nodeName, and hands each node a pod source (Source) that sends
// that node's full pod list as a SET after every change to it, as Source
// does with a watch of its own. It is for programs that run many agents in
// one process (a node simulator): N nodes cost the API server one watch
// instead of N.
type Shared struct {
	client   kubernetes.Interface
	field    string
	label    string
	backoff  time.Duration
	clock    clock.Clock
	log      *zap.Logger
	once     lifecycle.Once
	syncedCh chan struct{}

	mu     sync.Mutex
	synced bool
	byNode map[string]map[string]*v1.Pod // node -> namespace/name -> pod
	nodeOf map[string]string             // namespace/name -> node
	subs   map[string]*NodeSource
}

// NewShared validates cfg and fills its defaults. It does no I/O.
func NewShared(cfg SharedConfig) (*Shared, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.MaxRetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxRetryBackoff must not be negative", ErrInvalidConfig))
	}
	if cfg.FieldSelector == "" {
		cfg.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}
	if _, err := fields.ParseSelector(cfg.FieldSelector); err != nil {
		errs = append(errs, fmt.Errorf("%w: FieldSelector %q: %v", ErrInvalidConfig, cfg.FieldSelector, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Shared{
		client:   cfg.Client,
		field:    cfg.FieldSelector,
		label:    cfg.LabelSelector,
		backoff:  cfg.MaxRetryBackoff,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		syncedCh: make(chan struct{}),
		byNode:   map[string]map[string]*v1.Pod{},
		nodeOf:   map[string]string{},
		subs:     map[string]*NodeSource{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("podconfig.apiserver.shared")
	return s, nil
}

// Run lists and watches the pods until ctx is done, re-listing after
// errors with the reflector's back-off. It returns nil once the reflector
// has stopped. See package lifecycle for the contract; a second call
// returns ErrAlreadyRan.
func (s *Shared) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	pods := s.client.CoreV1().Pods(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector, opts.LabelSelector = s.field, s.label
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector, opts.LabelSelector = s.field, s.label
			return pods.Watch(ctx, opts)
		},
	}, s.client)
	logger := logr.New(&zapSink{log: s.log.Named("reflector")})
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, &sharedStore{s: s}, cache.ReflectorOptions{
		Name:    "podconfig-apiserver-shared",
		Clock:   s.clock,
		Logger:  &logger,
		Backoff: retryBackoff(s.backoff),
	})
	s.log.Info("watching the API server for the pods of every node", zap.String("fieldSelector", s.field))
	r.RunWithContext(ctx)
	s.log.Info("stopped watching the API server")
	return nil
}

// Synced is closed once the first list has been stored.
func (s *Shared) Synced() <-chan struct{} { return s.syncedCh }

// Pods returns the pods bound to nodeName as last seen, sorted by
// namespace and name. The pods are shared: do not change them.
func (s *Shared) Pods(nodeName string) []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedPods(s.byNode[nodeName])
}

// Each calls f with every pod seen, under the store's lock: f must be
// quick and must not call back into s or change the pod.
func (s *Shared) Each(f func(nodeName string, pod *v1.Pod)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, pods := range s.byNode {
		for _, p := range pods {
			f(node, p)
		}
	}
}

// Source returns the pod source of one node: its Run sends the node's pod
// set into out once the first list is stored and again after every change
// to the node's pods. Changes that come faster than out is read are
// coalesced into one SET with the latest pods (never blocking the watch of
// the other nodes). At most one source of a node name runs at a time.
func (s *Shared) Source(nodeName string, out chan<- kubetypes.PodUpdate) (*NodeSource, error) {
	var errs []error
	if nodeName == "" {
		errs = append(errs, fmt.Errorf("%w: Source: nodeName is required", ErrInvalidConfig))
	}
	if out == nil {
		errs = append(errs, fmt.Errorf("%w: Source: out is required", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &NodeSource{shared: s, nodeName: nodeName, out: out, wake: make(chan struct{}, 1)}, nil
}

// NodeSource is one node's pod source on a Shared watch.
type NodeSource struct {
	shared   *Shared
	nodeName string
	out      chan<- kubetypes.PodUpdate
	wake     chan struct{}
	once     lifecycle.Once
}

// Run sends the node's pod sets until ctx is done; see Shared.Source. It
// returns ErrNodeWatched when another source of the same node runs, and
// nil when ctx ends. See package lifecycle for the contract.
func (n *NodeSource) Run(ctx context.Context) error {
	if err := n.once.Start(); err != nil {
		return err
	}
	s := n.shared
	s.mu.Lock()
	if _, taken := s.subs[n.nodeName]; taken {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNodeWatched, n.nodeName)
	}
	s.subs[n.nodeName] = n
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.subs[n.nodeName] == n {
			delete(s.subs, n.nodeName)
		}
		s.mu.Unlock()
	}()
	select {
	case <-s.syncedCh:
	case <-ctx.Done():
		return nil
	}
	for {
		// Wake-ups are sent under s.mu: one drained while the set is read
		// under it is for a change the set includes, and one that comes
		// after is for a change it does not.
		s.mu.Lock()
		select {
		case <-n.wake:
		default:
		}
		pods := sortedPods(s.byNode[n.nodeName])
		s.mu.Unlock()
		u := kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.SourceAPI}
		select {
		case n.out <- u:
		case <-ctx.Done():
			return nil
		}
		select {
		case <-n.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// notifyLocked wakes the source of nodeName, if one runs; s.mu is held.
func (s *Shared) notifyLocked(nodeName string) {
	if n := s.subs[nodeName]; n != nil {
		select {
		case n.wake <- struct{}{}:
		default: // a wake-up is pending: the set it sends will be current
		}
	}
}

// putLocked stores pod (nil: removes key) and wakes the nodes concerned.
func (s *Shared) putLocked(key string, pod *v1.Pod) {
	old, had := s.nodeOf[key]
	if had {
		delete(s.byNode[old], key)
		if len(s.byNode[old]) == 0 {
			delete(s.byNode, old)
		}
		delete(s.nodeOf, key)
	}
	node := ""
	if pod != nil {
		node = pod.Spec.NodeName
	}
	if node != "" {
		m := s.byNode[node]
		if m == nil {
			m = map[string]*v1.Pod{}
			s.byNode[node] = m
		}
		m[key] = pod
		s.nodeOf[key] = node
	}
	if s.synced {
		if had {
			s.notifyLocked(old)
		}
		if node != "" && node != old {
			s.notifyLocked(node)
		}
	}
}

func sortedPods(m map[string]*v1.Pod) []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(m))
	for _, p := range m {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods
}

// sharedStore is the reflector's store of a Shared watch.
type sharedStore struct{ s *Shared }

var _ cache.ReflectorStore = (*sharedStore)(nil)

func (st *sharedStore) change(obj interface{}, remove bool) error {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return fmt.Errorf("apiserver: shared watch got %T, not a pod", obj)
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		return err
	}
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if remove {
		pod = nil
	}
	st.s.putLocked(key, pod)
	return nil
}

func (st *sharedStore) Add(obj interface{}) error    { return st.change(obj, false) }
func (st *sharedStore) Update(obj interface{}) error { return st.change(obj, false) }
func (st *sharedStore) Delete(obj interface{}) error { return st.change(obj, true) }
func (st *sharedStore) Resync() error                { return nil }

// Replace is a (re-)list: the store becomes list and every node with a
// running source is sent its set (the first list marks it seen).
func (st *sharedStore) Replace(list []interface{}, _ string) error {
	s := st.s
	byNode := map[string]map[string]*v1.Pod{}
	nodeOf := map[string]string{}
	for _, obj := range list {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return fmt.Errorf("apiserver: shared watch got %T, not a pod", obj)
		}
		key, err := cache.MetaNamespaceKeyFunc(pod)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			continue
		}
		m := byNode[pod.Spec.NodeName]
		if m == nil {
			m = map[string]*v1.Pod{}
			byNode[pod.Spec.NodeName] = m
		}
		m[key] = pod
		nodeOf[key] = pod.Spec.NodeName
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode, s.nodeOf = byNode, nodeOf
	if !s.synced {
		s.synced = true
		close(s.syncedCh)
	}
	for node := range s.subs {
		s.notifyLocked(node)
	}
	return nil
}
