package podworkers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// syncCall is one call the fake syncer saw.
type syncCall struct {
	op         string // "sync", "terminating", "runtime", "terminated"
	uid        types.UID
	name       string
	updateType UpdateType // for "sync"
	grace      int64      // for "terminating"
	statusFn   bool       // for "terminating": a status func was given
}

func (c syncCall) String() string {
	switch c.op {
	case "sync":
		return fmt.Sprintf("%s:sync(%v)", c.uid, c.updateType)
	case "terminating":
		return fmt.Sprintf("%s:terminating(%d)", c.uid, c.grace)
	}
	return fmt.Sprintf("%s:%s", c.uid, c.op)
}

// fakeSyncer records calls and can block, fail or report terminal per UID.
type fakeSyncer struct {
	mu       sync.Mutex
	calls    []syncCall
	terminal map[types.UID]bool
	// errs[uid] is returned (once) by the next call for uid.
	errs map[types.UID]error
	// block[op+uid] makes the call wait until the channel is closed or its
	// ctx ends (then it returns the ctx error and counts a cancellation).
	block     map[string]chan struct{}
	cancelled map[types.UID]int
	// cancelErr, if set, is what a blocked call returns when its ctx ends
	// instead of the ctx error (a runtime's own error for the cancelled
	// call, such as a gRPC Canceled status).
	cancelErr error
	// statusFns are the status funcs handed to SyncTerminatingPod.
	statusFns []func(*v1.PodStatus)
	// onSync, if set, runs in every SyncPod call with its context.
	onSync func(ctx context.Context, uid types.UID)
}

func newFakeSyncer() *fakeSyncer {
	return &fakeSyncer{
		terminal:  map[types.UID]bool{},
		errs:      map[types.UID]error{},
		block:     map[string]chan struct{}{},
		cancelled: map[types.UID]int{},
	}
}

func (f *fakeSyncer) record(ctx context.Context, c syncCall) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	ch := f.block[c.op+"/"+string(c.uid)]
	err := f.errs[c.uid]
	delete(f.errs, c.uid)
	f.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			f.mu.Lock()
			f.cancelled[c.uid]++
			cerr := f.cancelErr
			f.mu.Unlock()
			if cerr != nil {
				return cerr
			}
			return ctx.Err()
		}
	}
	return err
}

func (f *fakeSyncer) SyncPod(ctx context.Context, ut UpdateType, pod, _ *v1.Pod, _ *kubetypes.PodStatus) (bool, error) {
	err := f.record(ctx, syncCall{op: "sync", uid: pod.UID, name: pod.Name, updateType: ut})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onSync != nil {
		f.onSync(ctx, pod.UID)
	}
	return f.terminal[pod.UID], err
}

func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *kubetypes.PodStatus, grace *int64, fn func(*v1.PodStatus)) error {
	c := syncCall{op: "terminating", uid: pod.UID, name: pod.Name, statusFn: fn != nil, grace: -1}
	if grace != nil {
		c.grace = *grace
	}
	if fn != nil {
		f.mu.Lock()
		f.statusFns = append(f.statusFns, fn)
		f.mu.Unlock()
	}
	return f.record(ctx, c)
}

func (f *fakeSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubetypes.Pod) error {
	return f.record(ctx, syncCall{op: "runtime", uid: rp.ID, name: rp.Name})
}

func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ *kubetypes.PodStatus) error {
	return f.record(ctx, syncCall{op: "terminated", uid: pod.UID, name: pod.Name})
}

func (f *fakeSyncer) blockOn(op string, uid types.UID) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.block[op+"/"+string(uid)] = ch
	return ch
}

func (f *fakeSyncer) unblock(op string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch := f.block[op+"/"+string(uid)]; ch != nil {
		close(ch)
		delete(f.block, op+"/"+string(uid))
	}
}

func (f *fakeSyncer) setErr(uid types.UID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[uid] = err
}

func (f *fakeSyncer) setTerminal(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminal[uid] = true
}

// history returns the calls for uid as strings.
func (f *fakeSyncer) history(uid types.UID) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.uid == uid {
			out = append(out, c.String())
		}
	}
	return out
}

func (f *fakeSyncer) all() []syncCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]syncCall(nil), f.calls...)
}

func (f *fakeSyncer) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// fakeCache returns a stored status (or an empty one) at once, records the
// times asked for, and can fail or block per UID.
type fakeCache struct {
	mu       sync.Mutex
	statuses map[types.UID]*kubetypes.PodStatus
	errs     map[types.UID]error
	block    map[types.UID]bool
	asked    map[types.UID][]time.Time
}

func newFakeCache() *fakeCache {
	return &fakeCache{
		statuses: map[types.UID]*kubetypes.PodStatus{},
		errs:     map[types.UID]error{},
		block:    map[types.UID]bool{},
		asked:    map[types.UID][]time.Time{},
	}
}

func (c *fakeCache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error) {
	c.mu.Lock()
	c.asked[uid] = append(c.asked[uid], t)
	block := c.block[uid]
	st, err := c.statuses[uid], c.errs[uid]
	delete(c.errs, uid)
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = &kubetypes.PodStatus{ID: uid}
	}
	return st, nil
}

func (c *fakeCache) set(uid types.UID, st *kubetypes.PodStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statuses[uid] = st
}

func runningStatus(uid types.UID) *kubetypes.PodStatus {
	return &kubetypes.PodStatus{ID: uid, ContainerStatuses: []*kubetypes.ContainerStatus{{Name: "c", State: kubetypes.ContainerStateRunning}}}
}

func exitedStatus(uid types.UID) *kubetypes.PodStatus {
	return &kubetypes.PodStatus{ID: uid, ContainerStatuses: []*kubetypes.ContainerStatus{{Name: "c", State: kubetypes.ContainerStateExited}}}
}

// env is one bubble's pod workers and fakes.
type env struct {
	t      *testing.T
	p      *Workers
	syncer *fakeSyncer
	cache  *fakeCache
	cancel context.CancelFunc
	done   chan error
}

// withWorkers runs fn in a synctest bubble with running pod workers (Rand
// fixed at 0 unless cfg sets one) and stops them afterwards, checking that
// Run returns and no goroutine leaks.
func withWorkers(t *testing.T, cfg Config, fn func(t *testing.T, e *env)) {
	t.Helper()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		e := &env{t: t, syncer: newFakeSyncer(), cache: newFakeCache(), done: make(chan error, 1)}
		if cfg.Syncer == nil {
			cfg.Syncer = e.syncer
		}
		if cfg.Cache == nil {
			cfg.Cache = e.cache
		}
		if cfg.Rand == nil {
			cfg.Rand = func() float64 { return 0 }
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.p = p
		ctx, cancel := context.WithCancel(t.Context())
		e.cancel = cancel
		go func() { e.done <- p.Run(ctx) }()
		fn(t, e)
		cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
}

// update hands an update to the workers and waits until they are idle.
func (e *env) update(ut UpdateType, pod *v1.Pod) {
	e.p.UpdatePod(UpdatePodOptions{UpdateType: ut, Pod: pod})
	synctest.Wait()
}

func (e *env) expectHistory(uid types.UID, want ...string) {
	e.t.Helper()
	got := e.syncer.history(uid)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("history of %s = %v, want %v", uid, got, want)
	}
}

func (e *env) status(uid types.UID) *podSyncStatus {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	return e.p.statuses[uid]
}

// workerCount is the number of open worker channels.
func (e *env) workerCount() int {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	return len(e.p.workers)
}

func newPod(uid, name string) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns",
			Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceAPI}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
}

func newStatic(uid, name string) *v1.Pod {
	p := newPod(uid, name)
	p.Annotations[kubetypes.ConfigSourceAnnotation] = "file"
	return p
}

func withPhase(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	p.Status.Phase = phase
	return p
}

func deleted(p *v1.Pod, grace *int64) *v1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = grace
	return p
}

func i64(v int64) *int64 { return &v }
