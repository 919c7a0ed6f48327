package apiservertest

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// PodWatch follows the pods of one namespace. Its methods are safe for
// concurrent use.
type PodWatch struct {
	clock  clock.PassiveClock
	synced func() bool
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	asked     map[string]time.Time
	running   map[string]time.Time
	deleteReq map[string]time.Time
	goneAt    map[string]time.Time
	lastTerm  map[string]*v1.ContainerStateTerminated
}

// WatchPods starts watching the pods of namespace ns until ctx ends or
// Stop is called; poll HasSynced before relying on it. A nil clk is the
// real clock.
func WatchPods(ctx context.Context, c kubernetes.Interface, ns string, clk clock.PassiveClock) *PodWatch {
	if clk == nil {
		clk = clock.RealClock{}
	}
	w := &PodWatch{clock: clk, done: make(chan struct{}),
		asked: map[string]time.Time{}, running: map[string]time.Time{}, deleteReq: map[string]time.Time{},
		goneAt: map[string]time.Time{}, lastTerm: map[string]*v1.ContainerStateTerminated{}}
	pods := c.CoreV1().Pods(ns)
	// The client says whether it can stream the initial list (a fake
	// clientset can't).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, opts)
		},
	}, c)
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &v1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.seen(o.(*v1.Pod)) },
			UpdateFunc: func(_, o any) { w.seen(o.(*v1.Pod)) },
			DeleteFunc: func(o any) {
				name := ""
				switch p := o.(type) {
				case *v1.Pod:
					w.seen(p)
					name = p.Name
				case cache.DeletedFinalStateUnknown:
					_, name, _ = cache.SplitMetaNamespaceKey(p.Key)
				}
				now := w.clock.Now()
				w.mu.Lock()
				w.goneAt[name] = now
				w.mu.Unlock()
			},
		}})
	w.synced = ctrl.HasSynced
	ctx, w.cancel = context.WithCancel(ctx)
	go func() { defer close(w.done); ctrl.RunWithContext(ctx) }()
	return w
}

// seen records p's first Running and its last terminated container state.
func (w *PodWatch) seen(p *v1.Pod) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[p.Name]; !ok && p.Status.Phase == v1.PodRunning {
		w.running[p.Name] = now
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			w.lastTerm[p.Name] = cs.State.Terminated
		}
	}
}

// HasSynced reports whether the watch has seen the namespace's initial
// list.
func (w *PodWatch) HasSynced() bool { return w.synced() }

// Stop ends the watch and waits for it. It may be called more than once.
func (w *PodWatch) Stop() { w.cancel(); <-w.done }

// Creating records that the pod named name is being asked for now.
func (w *PodWatch) Creating(name string) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked[name] = now
}

// Deleting records that the deletion of the pod named name is being
// asked for now.
func (w *PodWatch) Deleting(name string) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deleteReq[name] = now
}

// Running is how many pods have been seen Running.
func (w *PodWatch) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// Gone is how many pods have been seen deleted.
func (w *PodWatch) Gone() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.goneAt)
}

// RunningLatencies is, for every pod seen Running whose creation was
// recorded with Creating, the time from Creating to the first watch event
// showing it Running, sorted.
func (w *PodWatch) RunningLatencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]time.Duration, 0, len(w.running))
	for name, at := range w.running {
		if a, ok := w.asked[name]; ok {
			out = append(out, at.Sub(a))
		}
	}
	slices.Sort(out)
	return out
}

// Deletion is when the deletion of the pod named name was asked for
// (Deleting) and when it was seen gone, each zero if not recorded, and its
// last terminated container state seen (nil if none).
func (w *PodWatch) Deletion(name string) (asked, gone time.Time, last *v1.ContainerStateTerminated) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleteReq[name], w.goneAt[name], w.lastTerm[name]
}
