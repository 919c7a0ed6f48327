package nodestatus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingSink wraps a Local sink, counts calls and injects errors.
type recordingSink struct {
	*Local
	mu          sync.Mutex
	gets        []bool // the fresh flag of each Get
	patches     int
	registers   int
	getErr      error
	patchErr    error
	registerErr error
}

func newRecordingSink(t *testing.T) *recordingSink {
	l, err := NewLocal(LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &recordingSink{Local: l}
}

func (s *recordingSink) Register(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	s.mu.Lock()
	s.registers++
	err := s.registerErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Local.Register(ctx, node)
}

func (s *recordingSink) Get(ctx context.Context, fresh bool) (*v1.Node, error) {
	s.mu.Lock()
	s.gets = append(s.gets, fresh)
	err := s.getErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Local.Get(ctx, fresh)
}

func (s *recordingSink) PatchStatus(ctx context.Context, original, node *v1.Node) (*v1.Node, error) {
	s.mu.Lock()
	s.patches++
	err := s.patchErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Local.PatchStatus(ctx, original, node)
}

func (s *recordingSink) counts() (registers, gets, patches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registers, len(s.gets), s.patches
}

type readyFlag struct {
	mu  sync.Mutex
	err error
}

func (r *readyFlag) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *readyFlag) set(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func testSetters(clk clock.PassiveClock, ready *readyFlag) []Setter {
	return DefaultSetters(SettersConfig{
		Clock:       clk,
		Address:     AddressConfig{NodeIPs: nil, Hostname: "10.0.0.9"},
		Machine:     MachineInfoConfig{Machine: machineOf(&Machine{NumCores: 2, MemoryCapacity: 4 << 30}, nil)},
		Runtime:     &fakeCRI{name: "fake", version: "1"},
		ReadyChecks: []func() error{ready.check},
	})
}

func newTestController(t *testing.T, clk clock.Clock, sink NodeSink, ready *readyFlag, mod func(*Config)) *Controller {
	t.Helper()
	cfg := Config{
		NodeName: "node-1",
		Sink:     sink,
		Setters:  testSetters(clk, ready),
		Clock:    clk,
		Rand:     func() float64 { return 0.5 }, // no report delay
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{NodeName: "Bad_Name", UpdateFrequency: -1, Setters: []Setter{nil}, UpdateRetries: -2})
	for _, field := range []string{"NodeName", "Sink", "Setters[0]", "UpdateFrequency", "UpdateRetries"} {
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !containsStr(err.Error(), field) {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestUpdateNodeStatusHeartbeatOnly: like the kubelet's
// TestUpdateNodeStatusWithLease, a status whose only change is heartbeats
// is not sent until the report period is up; a real change is sent at once.
func TestUpdateNodeStatusHeartbeatOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	sink := newRecordingSink(t)
	ready := &readyFlag{}
	var reported int
	c := newTestController(t, clk, sink, ready, func(cfg *Config) {
		cfg.OnReported = func(*v1.Node) { reported++ }
	})
	ctx := t.Context()

	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Registration, then the first update: the initial status already equals
	// what the setters compute, but nothing was ever reported: the report
	// period counts from the zero time, so it is sent.
	if r, _, p := sink.counts(); r != 1 || p != 1 {
		t.Fatalf("after first sync: registers %d patches %d", r, p)
	}
	select {
	case <-c.Ready():
	default:
		t.Fatal("Ready not closed after a Ready status was stored")
	}

	for i := 1; i <= 29; i++ { // 29 × 10s < 5m
		clk.Step(DefaultUpdateFrequency)
		if err := c.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, p := sink.counts(); p != 1 {
		t.Fatalf("heartbeat-only changes were sent: %d patches", p)
	}
	// All tries were first tries (cached).
	for i, fresh := range sink.gets {
		if fresh {
			t.Fatalf("get %d was fresh without a failure", i)
		}
	}
	hb := sink.Node().Status.Conditions[0].LastHeartbeatTime.Time
	if !hb.Equal(t0) {
		t.Errorf("stored heartbeat %v moved without a patch", hb)
	}

	clk.Step(DefaultUpdateFrequency) // 300s since the report
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, p := sink.counts(); p != 2 {
		t.Fatalf("report period: %d patches, want 2", p)
	}
	if hb := sink.Node().Status.Conditions[0].LastHeartbeatTime.Time; !hb.Equal(clk.Now()) {
		t.Errorf("heartbeat after report = %v, want %v", hb, clk.Now())
	}

	// A real change (runtime down) is sent at the next update.
	clk.Step(DefaultUpdateFrequency)
	ready.set(errors.New("runtime down"))
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, p := sink.counts(); p != 3 {
		t.Fatalf("change: %d patches, want 3", p)
	}
	if conditionTrue(sink.Node(), v1.NodeReady) {
		t.Error("stored node still Ready")
	}
	if reported != 33 {
		t.Errorf("OnReported called %d times, want 33 (registration + 32 updates)", reported)
	}
}

// TestReportPeriodDelay: after a change the report period is moved by the
// random delay (here −2.5m with r=0); after an unchanged report it is the
// plain period again.
func TestReportPeriodDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sink := newRecordingSink(t)
	c := newTestController(t, clk, sink, &readyFlag{}, func(cfg *Config) {
		cfg.Rand = func() float64 { return 0 }
	})
	ctx := t.Context()
	if err := c.SyncOnce(ctx); err != nil { // first report: delay −2.5m
		t.Fatal(err)
	}
	step := func(d time.Duration, wantPatches int) {
		t.Helper()
		clk.Step(d)
		if err := c.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, p := sink.counts(); p != wantPatches {
			t.Fatalf("at +%v: %d patches, want %d", d, p, wantPatches)
		}
	}
	step(2*time.Minute, 1)
	step(30*time.Second, 2) // 2.5m = 5m − 2.5m: unchanged report, delay now 0
	step(2*time.Minute+59*time.Second, 2)
	step(2*time.Minute+time.Second, 3) // 5m after the last report
}

// TestUpdateExistingNodeStatusTimeout: like the kubelet's test of the same
// name, every try fails: 5 tries, the first cached and the rest fresh, and
// OnRepeatedHeartbeatFailure from the second failure on.
func TestUpdateExistingNodeStatusTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sink := newRecordingSink(t)
	var failures int
	c := newTestController(t, clk, sink, &readyFlag{}, func(cfg *Config) {
		cfg.OnRepeatedHeartbeatFailure = func() { failures++ }
	})
	ctx := t.Context()
	if err := c.Register(ctx); err != nil {
		t.Fatal(err)
	}
	sink.patchErr = errors.New("timeout")
	err := c.SyncOnce(ctx)
	if !errors.Is(err, ErrUpdateRetries) || !containsStr(err.Error(), "timeout") {
		t.Fatalf("err = %v", err)
	}
	if _, g, p := sink.counts(); g != DefaultUpdateRetries || p != DefaultUpdateRetries {
		t.Errorf("gets %d patches %d, want %d each", g, p, DefaultUpdateRetries)
	}
	if sink.gets[0] || !sink.gets[1] || !sink.gets[4] {
		t.Errorf("fresh flags = %v, want first cached, rest fresh", sink.gets)
	}
	if failures != DefaultUpdateRetries-1 {
		t.Errorf("OnRepeatedHeartbeatFailure called %d times, want %d", failures, DefaultUpdateRetries-1)
	}

	// The second try succeeding stops the retries and calls no callback.
	sink.patchErr = nil
	sink.getErr = errors.New("cache not synced")
	failures = 0
	calls := 0
	c2 := newTestController(t, clk, sink, &readyFlag{}, func(cfg *Config) {
		cfg.OnRepeatedHeartbeatFailure = func() { failures++ }
		cfg.Sink = &flakyGet{recordingSink: sink, calls: &calls}
	})
	if err := c2.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || failures != 0 {
		t.Errorf("gets %d failures %d, want 2 and 0", calls, failures)
	}
}

// flakyGet fails the first Get only.
type flakyGet struct {
	*recordingSink
	calls *int
}

func (f *flakyGet) Get(ctx context.Context, fresh bool) (*v1.Node, error) {
	*f.calls++
	if *f.calls == 1 {
		return nil, errors.New("cache not synced")
	}
	return f.Local.Get(ctx, fresh)
}

func TestSyncOnceRegisterFailure(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	sink := newRecordingSink(t)
	sink.registerErr = errors.New("forbidden")
	c := newTestController(t, clk, sink, &readyFlag{}, nil)
	if err := c.SyncOnce(t.Context()); !errors.Is(err, ErrRegister) {
		t.Fatalf("err = %v, want ErrRegister", err)
	}
	if _, g, _ := sink.counts(); g != 0 {
		t.Errorf("status update tried before registration: %d gets", g)
	}
}

func TestLabelsFixedAreAChange(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	sink := newRecordingSink(t)
	c := newTestController(t, clk, sink, &readyFlag{}, nil)
	ctx := t.Context()
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Someone removed the os label: the next update puts it back at once.
	sink.Local.mu.Lock()
	delete(sink.Local.node.Labels, labelOS)
	sink.Local.mu.Unlock()
	clk.Step(time.Second)
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, p := sink.counts(); p != 2 {
		t.Fatalf("%d patches, want 2", p)
	}
	if sink.Node().Labels[labelOS] == "" {
		t.Error("os label not restored")
	}
}

// TestRunFastUpdateUntilReady: like the kubelet's TestFastStatusUpdateOnce,
// registration retries back off, then the status is computed every 100ms
// until the node is Ready, then every 10s.
func TestRunFastUpdateUntilReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink(t)
		sink.registerErr = errors.New("apiserver down")
		ready := &readyFlag{err: errors.New("runtime starting")}
		c := newTestController(t, clock.RealClock{}, sink, ready, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()

		// Register tries at 0, 100ms, 300ms, 700ms (back-off doubles).
		advance(650 * time.Millisecond)
		synctest.Wait()
		if r, _, _ := sink.counts(); r != 3 {
			t.Fatalf("%d registration tries by 650ms, want 3", r)
		}
		sink.mu.Lock()
		sink.registerErr = nil
		sink.mu.Unlock()
		advance(100 * time.Millisecond) // 750ms: registered at 700ms, first sync
		synctest.Wait()
		_, g0, _ := sink.counts()
		advance(time.Second) // fast: ~10 syncs
		synctest.Wait()
		_, g1, _ := sink.counts()
		if g1-g0 < 9 || g1-g0 > 11 {
			t.Fatalf("%d syncs in 1s while not ready, want ~10", g1-g0)
		}
		select {
		case <-c.Ready():
			t.Fatal("ready too early")
		default:
		}
		ready.set(nil)
		advance(100 * time.Millisecond)
		synctest.Wait()
		select {
		case <-c.Ready():
		default:
			t.Fatal("not ready 100ms after the runtime came up")
		}
		_, g2, _ := sink.counts()
		advance(5 * time.Second) // slow: no sync within 10s
		synctest.Wait()
		if _, g3, _ := sink.counts(); g3 != g2 {
			t.Fatalf("%d syncs within 5s after ready, want 0", g3-g2)
		}
		advance(6 * time.Second)
		synctest.Wait()
		if _, g4, _ := sink.counts(); g4 != g2+1 {
			t.Fatalf("%d syncs after 11s, want 1", g4-g2)
		}
		if err := c.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestRunFastUpdateTimeout: a node that never becomes Ready gets fast
// updates only for FastUpdateTimeout.
func TestRunFastUpdateTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink(t)
		ready := &readyFlag{err: errors.New("never")}
		c := newTestController(t, clock.RealClock{}, sink, ready, func(cfg *Config) {
			cfg.FastUpdateTimeout = 2 * time.Second
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		advance(2*time.Second + 50*time.Millisecond)
		synctest.Wait()
		_, g0, _ := sink.counts()
		if g0 < 19 {
			t.Fatalf("%d syncs in the fast phase, want ~21", g0)
		}
		advance(9 * time.Second)
		synctest.Wait()
		if _, g1, _ := sink.counts(); g1 != g0 {
			t.Fatalf("fast updates went on after the timeout: %d more", g1-g0)
		}
		cancel()
		<-done
	})
}

// advance lets d pass on the synctest bubble's clock.
func advance(d time.Duration) { <-time.After(d) }

// UpdateNow cuts the wait short: a ready check that changed (the node
// shutting down) is reported at once, not at the next period.
func TestRunUpdateNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink(t)
		ready := &readyFlag{}
		now := make(chan struct{}, 1)
		c := newTestController(t, clock.RealClock{}, sink, ready, func(cfg *Config) { cfg.UpdateNow = now })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		advance(time.Second) // registered, ready, in the 10s period
		synctest.Wait()
		_, g0, _ := sink.counts()
		ready.set(errors.New("node is shutting down"))
		now <- struct{}{}
		synctest.Wait()
		if _, g1, _ := sink.counts(); g1 != g0+1 {
			t.Fatalf("%d syncs right after UpdateNow, want 1", g1-g0)
		}
		advance(5 * time.Second)
		synctest.Wait()
		if _, g2, _ := sink.counts(); g2 != g0+1 {
			t.Fatalf("%d more syncs within 5s, want none", g2-g0-1)
		}
		cancel()
		<-done
	})
}
