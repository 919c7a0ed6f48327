package syncloop

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/podworkers"
)

// The real components satisfy the loop's consumer interfaces.
var (
	_ RuntimeManager         = (*kuberuntime.Manager)(nil)
	_ RuntimeStatusGetter    = (*fake.Runtime)(nil)
	_ podworkers.PodCache    = (*pleg.Cache)(nil)
	_ podstatus.ReasonSource = RuntimeManager(nil)
	_ podContentRemover      = (*kuberuntime.Manager)(nil)
)

var ltEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// ltEnv is a loop over a fake CRI runtime, a real kuberuntime.Manager and a
// real GenericPLEG.
type ltEnv struct {
	t       *testing.T
	rt      *fake.Runtime
	mgr     *kuberuntime.Manager
	plg     *pleg.GenericPLEG
	updates chan kubetypes.PodUpdate
	events  chan *kubetypes.PodLifecycleEvent
	sink    *podstatus.MemorySink
	loop    *Loop
	ready   atomic.Bool
	root    string
}

// ltNew builds the environment on clk; mod may change the loop config.
func ltNew(t *testing.T, clk clock.WithTicker, mod func(*Config)) *ltEnv {
	t.Helper()
	e := &ltEnv{t: t, updates: make(chan kubetypes.PodUpdate, 16), events: make(chan *kubetypes.PodLifecycleEvent, 100), sink: podstatus.NewMemorySink(), root: t.TempDir()}
	e.ready.Store(true)
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox", "registry.k8s.io/pause:3.10"}})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	e.mgr, err = kuberuntime.New(kuberuntime.Config{
		Runtime: rt, Images: rt, Clock: clk, PodLogsRoot: t.TempDir(),
		DNS: kuberuntime.DNSConfig{ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.plg, err = pleg.New(pleg.Config{Runtime: e.mgr, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		NodeName:      "node-1",
		Updates:       e.updates,
		Events:        e.events,
		SourcesReady:  e.ready.Load,
		Runtime:       e.mgr,
		RuntimeStatus: rt,
		PLEG:          e.plg,
		StatusSink:    e.sink,
		Root:          e.root,
		Clock:         clk,
	}
	if mod != nil {
		mod(&cfg)
	}
	e.loop, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// forward converts the PLEG's events into the loop's until ctx ends.
func (e *ltEnv) forward(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-e.plg.Watch():
				select {
				case e.events <- &kubetypes.PodLifecycleEvent{ID: ev.ID, Type: ev.Type, Data: ev.Data}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
}

func ltPod(uid, name string, created int, containers ...v1.Container) *v1.Pod {
	if len(containers) == 0 {
		containers = []v1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "infinity"}}}
	}
	grace := int64(5)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: types.UID(uid), Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(ltEpoch.Add(time.Duration(created) * time.Second)),
			Annotations:       map[string]string{kubetypes.ConfigSourceAnnotation: "api"},
		},
		Spec: v1.PodSpec{Containers: containers, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace},
	}
}

// ltWorkerState returns whether the pod workers know uid, and its state.
func ltWorkerState(p *podworkers.Workers, uid types.UID) (podworkers.State, bool) {
	return p.PodState(uid)
}

// ltStub is a RuntimeManager that records calls and runs nothing.
type ltStub struct {
	mu       sync.Mutex
	pods     []*kubetypes.Pod
	syncs    []types.UID
	kills    []types.UID
	gcs      int
	gcReady  []bool
	forgot   []types.UID
	statuses map[types.UID]*kubetypes.PodStatus
	// started makes SyncPod report that it started a container.
	started bool
	// gcErr is GarbageCollect's answer.
	gcErr error
}

func (s *ltStub) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods, nil
}

func (s *ltStub) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubetypes.PodStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.statuses[uid]; ok {
		return st, nil
	}
	return &kubetypes.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
}

func (s *ltStub) SyncPod(_ context.Context, pod *v1.Pod, _ *kubetypes.PodStatus, _ []v1.Secret) kubetypes.SyncResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs = append(s.syncs, pod.UID)
	if s.started {
		return kubetypes.SyncResult{Steps: []kubetypes.StepResult{{Action: kubetypes.ActionStartContainer, Target: "c"}}}
	}
	return kubetypes.SyncResult{}
}

func (s *ltStub) KillPod(_ context.Context, pod *v1.Pod, rp *kubetypes.Pod, _ *int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pod != nil {
		s.kills = append(s.kills, pod.UID)
	} else if rp != nil {
		s.kills = append(s.kills, rp.ID)
	}
	return nil
}

func (s *ltStub) GarbageCollect(_ context.Context, _ kubetypes.GCPolicy, _ kubetypes.PodStateProvider, ready bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcs++
	s.gcReady = append(s.gcReady, ready)
	return s.gcErr
}

func (s *ltStub) Reason(types.UID, string) (string, string) { return "", "" }

func (s *ltStub) ForgetPod(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot = append(s.forgot, uid)
}

func (s *ltStub) counts() (syncs, kills, gcs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.syncs), len(s.kills), s.gcs
}

// ltPLEG is a PLEG whose cache always has a status newer than asked; its
// funcs, when set, give its answers (healthy and no-op otherwise).
type ltPLEG struct {
	healthy func() (bool, error)
	relist  func(types.UID)
}

func (ltPLEG) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid}, nil
}

func (p ltPLEG) Healthy() (bool, error) {
	if p.healthy != nil {
		return p.healthy()
	}
	return true, nil
}

func (p ltPLEG) RequestRelist(uid types.UID) {
	if p.relist != nil {
		p.relist(uid)
	}
}

// ltObservingPLEG is an ltPLEG with the optional podStatusObserver
// capability.
type ltObservingPLEG struct {
	ltPLEG
	observe       func(types.UID, *kubetypes.PodStatus)
	hold, release func(types.UID)
}

func (p *ltObservingPLEG) ObservePodStatus(uid types.UID, st *kubetypes.PodStatus) {
	if p.observe != nil {
		p.observe(uid, st)
	}
}

func (p *ltObservingPLEG) HoldPod(uid types.UID) {
	if p.hold != nil {
		p.hold(uid)
	}
}

func (p *ltObservingPLEG) ReleasePod(uid types.UID) {
	if p.release != nil {
		p.release(uid)
	}
}

// ltListingPLEG is an ltPLEG with the optional runtimeLister capability.
type ltListingPLEG struct {
	ltPLEG
	listing func() ([]*kubetypes.Pod, time.Time)
}

func (p ltListingPLEG) Listing() ([]*kubetypes.Pod, time.Time) { return p.listing() }

// ltStubLoop builds a loop over ltStub on a fake clock-like clk.
func ltStubLoop(t *testing.T, clk clock.WithTicker, mod func(*Config)) (*Loop, *ltStub, chan kubetypes.PodUpdate) {
	t.Helper()
	stub := &ltStub{statuses: map[types.UID]*kubetypes.PodStatus{}}
	updates := make(chan kubetypes.PodUpdate, 16)
	cfg := Config{Updates: updates, Runtime: stub, PLEG: ltPLEG{}, Clock: clk}
	if mod != nil {
		mod(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, stub, updates
}

func (s *ltStub) killed(uid types.UID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.kills {
		if k == uid {
			n++
		}
	}
	return n
}
