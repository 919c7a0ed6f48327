package pleg

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

// start runs fn in a goroutine and returns a function that cancels it and
// returns its error.
func start(t *testing.T, fn func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.RelistPeriod = time.Second })
		f.rt.setPods(pod("p", ctr("c1", running)))
		stop := start(t, f.g.Run)

		// The first relist is at once.
		synctest.Wait()
		if f.rt.lists() != 1 {
			t.Fatalf("lists %d after start", f.rt.lists())
		}
		expectEvents(t, f.g.Watch(), "p/ContainerStarted/c1")
		if ok, _ := f.g.Healthy(); !ok {
			t.Fatal("unhealthy after the first relist")
		}
		if err := f.g.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
			t.Fatalf("second Run: %v", err)
		}

		// Then every period after the previous relist.
		f.clock.Step(999 * time.Millisecond)
		synctest.Wait()
		if f.rt.lists() != 1 {
			t.Fatal("relisted early")
		}
		f.clock.Step(time.Millisecond)
		synctest.Wait()
		if f.rt.lists() != 2 {
			t.Fatalf("lists %d, want 2", f.rt.lists())
		}

		// On-demand requests are served between relists.
		f.rt.setPods(pod("p", ctr("c1", exited)))
		f.clock.Step(100 * time.Millisecond)
		f.g.RequestRelist("p")
		synctest.Wait()
		expectEvents(t, f.g.Watch(), "p/ContainerDied/c1")
		if f.rt.lists() != 2 {
			t.Fatal("on-demand relist listed everything")
		}

		// A new period relists at once and then keeps the new period.
		f.g.SetRelistPeriod(5*time.Second, time.Minute)
		synctest.Wait()
		if f.rt.lists() != 3 {
			t.Fatalf("lists %d, want 3 after SetRelistPeriod", f.rt.lists())
		}
		f.clock.Step(4 * time.Second)
		synctest.Wait()
		if f.rt.lists() != 3 {
			t.Fatal("old period still in use")
		}
		f.clock.Step(time.Second)
		synctest.Wait()
		if f.rt.lists() != 4 {
			t.Fatalf("lists %d, want 4", f.rt.lists())
		}

		if err := stop(); err != nil {
			t.Fatalf("Run returned %v", err)
		}
		// It runs at most once (package lifecycle): not again after it
		// returned either.
		if err := f.g.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
			t.Fatalf("Run after it returned: %v", err)
		}
		synctest.Wait()
		if f.rt.lists() != 4 {
			t.Fatalf("lists %d, want 4: a refused Run relisted", f.rt.lists())
		}
	})
}

func TestRunKeepsGoingOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.rt.podsErr = errors.New("runtime down")
		stop := start(t, f.g.Run)
		synctest.Wait()
		f.clock.Step(time.Second)
		synctest.Wait()
		if f.rt.lists() != 2 {
			t.Fatalf("lists %d", f.rt.lists())
		}
		if ok, _ := f.g.Healthy(); ok {
			t.Fatal("healthy without a successful relist")
		}
		f.rt.mu.Lock()
		f.rt.podsErr = nil
		f.rt.mu.Unlock()
		f.clock.Step(time.Second)
		synctest.Wait()
		if ok, err := f.g.Healthy(); !ok {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// stubEvents is an EventSource whose calls return scripted errors; with no
// error left it blocks until ctx ends, delivering what is pushed.
type stubEvents struct {
	mu    sync.Mutex
	errs  []error
	calls int
	push  chan *runtimeapi.ContainerEventResponse
}

func (s *stubEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	s.mu.Lock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	if cb != nil {
		cb(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ev := <-s.push:
			select {
			case ch <- ev:
			case <-ctx.Done():
			}
		}
	}
}

func (s *stubEvents) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func newEvented(t *testing.T, rt Runtime, src EventSource, fc *clocktesting.FakeClock) *EventedPLEG {
	t.Helper()
	e, err := NewEvented(EventedConfig{Config: Config{Runtime: rt, Clock: fc, ChannelCapacity: 10}, Events: src})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestNewEventedReportsEveryProblem: NewEvented names every bad field at
// once, its own and those of the embedded Config.
func TestNewEventedReportsEveryProblem(t *testing.T) {
	_, err := NewEvented(EventedConfig{MaxStreamRetries: -1, CacheUpdatePeriod: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewEvented = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Events", "Runtime", "MaxStreamRetries", "CacheUpdatePeriod"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewEvented = %v: %s not named", err, name)
		}
	}
	if n := strings.Count(err.Error(), "RelistThreshold"); n != 0 {
		t.Errorf("NewEvented = %v: a good RelistThreshold named", err)
	}
}

func TestEventedValidates(t *testing.T) {
	rt := newStub()
	for name, cfg := range map[string]EventedConfig{
		"Events":                 {Config: Config{Runtime: rt}},
		"Runtime":                {Events: &stubEvents{}},
		"EventedRelistThreshold": {Config: Config{Runtime: rt}, Events: &stubEvents{}, EventedRelistPeriod: time.Hour},
		"MaxStreamRetries":       {Config: Config{Runtime: rt}, Events: &stubEvents{}, MaxStreamRetries: -1},
		"CacheUpdatePeriod":      {Config: Config{Runtime: rt}, Events: &stubEvents{}, CacheUpdatePeriod: -1},
	} {
		if _, err := NewEvented(cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEventedFallsBackOnUnimplemented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// runtime/fake configured as containerd 1.6: no event stream.
		fc := clocktesting.NewFakeClock(epoch)
		cri, err := fake.New(fake.Config{Clock: fc, EventsUnimplemented: true})
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		e := newEvented(t, mgr, cri, fc)
		stop := start(t, e.Run)
		synctest.Wait()
		if e.InUse() {
			t.Fatal("still using events after Unimplemented")
		}
		g := e.Generic()
		g.mu.Lock()
		period := g.period
		g.mu.Unlock()
		if period != DefaultRelistPeriod {
			t.Fatalf("period %v after fall-back", period)
		}

		// Relisting now runs every second and sees a new sandbox.
		_, err = cri.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"},
			Labels:   map[string]string{kuberuntime.LabelPodUID: "u1", kuberuntime.LabelPodName: "web", kuberuntime.LabelPodNamespace: "default"},
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			}},
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		fc.Step(time.Second)
		synctest.Wait()
		evs := drain(e.Watch())
		if len(evs) != 1 || !strings.HasPrefix(evs[0], "u1/ContainerStarted/") {
			t.Fatalf("events %v", evs)
		}
		if ok, err := e.Healthy(); !ok {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEventedFallsBackAfterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		rt := newStub()
		broken := status.Error(codes.Unavailable, "connection reset")
		src := &stubEvents{errs: []error{broken, broken, broken, broken, broken, broken}}
		e := newEvented(t, rt, src, fc)
		stop := start(t, e.Run)
		synctest.Wait()
		if e.InUse() {
			t.Fatal("still using events")
		}
		if src.count() != DefaultMaxStreamRetries {
			t.Fatalf("stream opened %d times, want %d", src.count(), DefaultMaxStreamRetries)
		}
		// First relist + one per failed attempt but the last + one at fall-back.
		if rt.lists() != 1+(DefaultMaxStreamRetries-1)+1 {
			t.Fatalf("lists %d", rt.lists())
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEventedFollowsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		rt := newStub()
		src := &stubEvents{errs: []error{status.Error(codes.Unavailable, "blip")}, push: make(chan *runtimeapi.ContainerEventResponse)}
		e := newEvented(t, rt, src, fc)
		stop := start(t, e.Run)
		synctest.Wait()
		if !e.InUse() || src.count() != 2 {
			t.Fatalf("in use %v, stream calls %d", e.InUse(), src.count())
		}
		if ok, err := e.Healthy(); !ok {
			t.Fatal(err)
		}

		sb := &runtimeapi.PodSandboxStatus{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "p", Name: "p", Namespace: "ns"}}
		rt.setPods(pod("p", ctr("c1", running)))
		at := epoch.Add(time.Second).UnixNano()
		src.push <- &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, CreatedAt: at, PodSandboxStatus: sb}
		synctest.Wait()
		expectEvents(t, e.Watch(), "p/ContainerStarted/c1")
		if st, _ := e.Cache().Get("p"); len(st.ContainerStatuses) != 1 || st.TimeStamp.UnixNano() != at {
			t.Fatalf("cache %+v", st)
		}

		// An event older than the cached status sends nothing.
		src.push <- &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, CreatedAt: at - 1, PodSandboxStatus: sb}
		// An event without a sandbox status is ignored.
		src.push <- &runtimeapi.ContainerEventResponse{ContainerId: "c9", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, CreatedAt: at + 5}
		synctest.Wait()
		expectEvents(t, e.Watch())

		// Stop, then deletion of the last container removes the pod.
		rt.setPods(pod("p", ctr("c1", exited)))
		src.push <- &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, CreatedAt: at + 1, PodSandboxStatus: sb}
		synctest.Wait()
		expectEvents(t, e.Watch(), "p/ContainerDied/c1")
		// A relist of the pod (as a pod worker's read makes) leaves a
		// record, which the deletion below must drop.
		if err := e.generic.RelistPod(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		hasRecord := func() bool {
			e.generic.relistMu.Lock()
			defer e.generic.relistMu.Unlock()
			return e.generic.records["p"] != nil
		}
		if !hasRecord() {
			t.Fatal("no record of the pod after RelistPod")
		}
		rt.setPods()
		src.push <- &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, CreatedAt: at + 2, PodSandboxStatus: sb}
		synctest.Wait()
		expectEvents(t, e.Watch(), "p/ContainerDied/c1", "p/ContainerRemoved/c1")
		if st, _ := e.Cache().Get("p"); st.Name != "" || len(st.ContainerStatuses) != 0 {
			t.Fatalf("cache %+v after deletion", st)
		}
		if hasRecord() {
			t.Fatal("the relist record of the deleted pod is kept until the next relist")
		}

		// The global cache time advances periodically.
		before := fc.Now()
		res := getNewerThanAsync(t.Context(), e.Cache(), "x", before)
		fc.Step(DefaultCacheUpdatePeriod)
		synctest.Wait()
		if r := <-res; r.err != nil {
			t.Fatal(r.err)
		}

		// A status read failure flags the pod for reinspection.
		rt.setStatus("p", nil, errors.New("gone away"))
		if err := e.HandleEvent(t.Context(), &runtimeapi.ContainerEventResponse{ContainerId: "c2", CreatedAt: at + 3, PodSandboxStatus: sb}); !errors.Is(err, ErrRelist) {
			t.Fatalf("HandleEvent: %v", err)
		}
		e.Generic().mu.Lock()
		_, flagged := e.Generic().reinspect["p"]
		e.Generic().mu.Unlock()
		if !flagged {
			t.Fatal("not flagged for reinspection")
		}

		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if e.InUse() {
			t.Fatal("in use after Run returned")
		}
	})
}

// TestEventedHealthyFullChannel: a full event channel leaves the evented
// PLEG healthy (see EventedPLEG.Healthy).
func TestEventedHealthyFullChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		rt := newStub()
		src := &stubEvents{push: make(chan *runtimeapi.ContainerEventResponse)}
		e := newEvented(t, rt, src, fc)
		stop := start(t, e.Run)
		synctest.Wait()
		for range cap(e.generic.events) {
			e.generic.send(&kubetypes.PodLifecycleEvent{ID: "x", Type: kubetypes.PodSync})
		}
		// Healthy: the sync loop reads the channel only while the PLEG
		// is healthy, so a full channel reported as unhealthy would stay
		// full for good.
		if ok, err := e.Healthy(); !ok {
			t.Fatalf("full channel: unhealthy: %v", err)
		}
		<-e.Watch()
		if ok, err := e.Healthy(); !ok {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestEventedGlobalTimeLagsTheClock: while events flow, the cache's global
// time is advanced to EventDeliveryMargin before the clock, not to the
// clock: a pod worker that changed its pod just before must wait for the
// change's event (or the margin), never take an older read as current.
func TestEventedGlobalTimeLagsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		src := &stubEvents{push: make(chan *runtimeapi.ContainerEventResponse)}
		e := newEvented(t, newStub(), src, fc)
		stop := start(t, e.Run)
		synctest.Wait()
		fc.Step(DefaultCacheUpdatePeriod)
		synctest.Wait()
		now := fc.Now()
		wctx, cancel := context.WithCancel(t.Context())
		recent := getNewerThanAsync(wctx, e.Cache(), "x", now.Add(-EventDeliveryMargin/2))
		if !blocked(recent) {
			t.Fatal("the global time reached the clock: a change made within the delivery margin could be missed")
		}
		if r := <-getNewerThanAsync(t.Context(), e.Cache(), "x", now.Add(-2*EventDeliveryMargin)); r.err != nil {
			t.Fatal(r.err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if r := <-recent; r.err == nil {
			t.Fatal("the waiter within the margin returned without an error")
		}
	})
}
