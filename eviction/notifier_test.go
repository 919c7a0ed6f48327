package eviction

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWithAllocatableThresholds(t *testing.T) {
	ts := mustParse(t,
		map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		map[string]string{"memory.available": "300Mi"},
		map[string]string{"memory.available": "30s"},
		map[string]string{"memory.available": "50Mi"})
	before := render(ts)
	got := WithAllocatableThresholds(ts)
	if render(ts) != before {
		t.Fatalf("input changed: %s", render(ts))
	}
	derived := got[len(ts):]
	if len(derived) != 1 || derived[0].String() != "allocatableMemory.available<100Mi minReclaim=50Mi" || derived[0].Operator != OpLessThan {
		t.Fatalf("derived %s, want only allocatableMemory.available<100Mi minReclaim=50Mi (hard)", render(derived))
	}
	if derived[0].Value.Quantity == ts[0].Value.Quantity && ts[0].Value.Quantity != nil {
		t.Error("the derived threshold shares the original's quantity")
	}
	if again := WithAllocatableThresholds(got); len(again) != len(got) {
		t.Errorf("applied twice: %s", render(again))
	}
	if pct := WithAllocatableThresholds(mustParse(t, map[string]string{"memory.available": "5%"}, nil, nil, nil)); render(pct[1:]) != "allocatableMemory.available<5%" {
		t.Errorf("percentage: %s", render(pct))
	}
	if none := WithAllocatableThresholds(nil); len(none) != 0 {
		t.Errorf("from nil: %s", render(none))
	}
}

// With EnforceAllocatable the pods cgroup running out of its allocatable
// memory is memory pressure and evicts, though the node has memory left.
func TestEnforceAllocatable(t *testing.T) {
	hard := map[string]string{"memory.available": "100Mi"}
	s := memSummary(1500, map[string]uint64{"a": 900, "b": 10})
	s.AllocatableMemory = &MemoryStats{AvailableBytes: mi(50), WorkingSetBytes: mi(910)}
	for _, enforce := range []bool{false, true} {
		h := newHarness(t, mustParse(t, hard, nil, nil, nil), []*v1.Pod{mkPod("a", 0, "", ""), mkPod("b", 0, "", "")}, Config{EnforceAllocatable: enforce})
		h.stats.s = s
		got := names(h.sync(t))
		if enforce {
			if got != "a" || !h.m.IsUnderMemoryPressure() || len(h.m.Thresholds()) != 2 {
				t.Errorf("enforced: evicted %q, pressure %v, thresholds %s", got, h.m.IsUnderMemoryPressure(), render(h.m.Thresholds()))
			}
			if msg := h.kills[0].status.Message; !strings.HasPrefix(msg, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.") {
				t.Errorf("message %q", msg)
			}
		} else if got != "" || h.m.IsUnderMemoryPressure() {
			t.Errorf("not enforced: evicted %q, pressure %v", got, h.m.IsUnderMemoryPressure())
		}
	}
}

// fakeNotifier counts re-arms and hands its trigger to the test.
type fakeNotifier struct {
	updates   atomic.Int32
	updateErr error
	runErr    error // returned at once from Run when set
	trigger   chan func()
	exited    atomic.Bool
}

func (n *fakeNotifier) UpdateThreshold(s *Summary) error {
	if s == nil || (s.Memory == nil && s.AllocatableMemory == nil) {
		panic("UpdateThreshold without memory stats")
	}
	n.updates.Add(1)
	return n.updateErr
}

func (n *fakeNotifier) Run(ctx context.Context, trigger func()) error {
	defer n.exited.Store(true)
	if n.runErr != nil {
		return n.runErr
	}
	n.trigger <- trigger
	<-ctx.Done()
	return ctx.Err()
}

// gatedStats blocks each Summary until the test lets it through.
type gatedStats struct {
	calls atomic.Int32
	gate  chan struct{}
	s     func() *Summary
}

func (g *gatedStats) Summary(ctx context.Context) (*Summary, error) {
	g.calls.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.s(), nil
}

// TestRunNotifiers: a crossing reported while a cycle runs gives exactly
// one more cycle (a burst is coalesced), an idle manager cycles at once on
// a trigger, the ticker still runs, notifiers are re-armed after each cycle
// with memory stats (a failing re-arm is not fatal), and Run returns only
// after the notifiers' Run has.
func TestRunNotifiers(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		clock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		st := &gatedStats{gate: make(chan struct{}), s: func() *Summary { return memSummary(2000, nil) }}
		n := &fakeNotifier{trigger: make(chan func(), 1), updateErr: errors.New("re-arm failed")}
		broken := &fakeNotifier{runErr: errors.New("no memcg here")}
		m, err := New(Config{
			Thresholds: mustParse(t, map[string]string{"memory.available": "100Mi"}, nil, nil, nil),
			Stats:      st, ActivePods: func() []*v1.Pod { return nil },
			KillPod:   func(context.Context, *v1.Pod, v1.PodStatus, int64) error { return nil },
			Notifiers: []ThresholdNotifier{n, broken},
			Interval:  10 * time.Second, Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		trigger := <-n.trigger
		synctest.Wait() // cycle 1 is waiting for its stats
		if c := st.calls.Load(); c != 1 {
			t.Fatalf("calls = %d at start, want 1", c)
		}
		for range 5 { // a burst during cycle 1
			trigger()
		}
		m.Trigger()
		st.gate <- struct{}{}
		synctest.Wait()
		if c := st.calls.Load(); c != 2 {
			t.Fatalf("calls = %d after a burst during a cycle, want 2", c)
		}
		st.gate <- struct{}{}
		synctest.Wait()
		if c, u := st.calls.Load(), n.updates.Load(); c != 2 || u != 2 {
			t.Fatalf("calls = %d, updates = %d after the extra cycle, want 2 and 2 (no third cycle)", c, u)
		}
		if !broken.exited.Load() {
			t.Fatal("the broken notifier's Run should have returned")
		}

		// Idle: a trigger cycles at once, before the interval.
		trigger()
		synctest.Wait()
		if c := st.calls.Load(); c != 3 {
			t.Fatalf("calls = %d after an idle trigger, want 3", c)
		}
		st.gate <- struct{}{}
		synctest.Wait()

		// The ticker still runs: 10s after the last cycle.
		clock.Step(9 * time.Second)
		synctest.Wait()
		if c := st.calls.Load(); c != 3 {
			t.Fatalf("calls = %d before the interval, want 3", c)
		}
		clock.Step(time.Second)
		synctest.Wait()
		if c := st.calls.Load(); c != 4 {
			t.Fatalf("calls = %d after the interval, want 4", c)
		}
		st.gate <- struct{}{}
		synctest.Wait()
		if u := n.updates.Load(); u != 4 {
			t.Fatalf("updates = %d, want one per cycle (4)", u)
		}
		if n.exited.Load() {
			t.Fatal("notifier exited while Run runs")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v", err)
		}
		if !n.exited.Load() {
			t.Fatal("Run returned before its notifier's Run")
		}
	})
}

// A cycle without memory stats does not re-arm the notifiers.
func TestNotifierNotUpdatedWithoutMemory(t *testing.T) {
	n := &fakeNotifier{}
	h := newHarness(t, mustParse(t, map[string]string{"pid.available": "10"}, nil, nil, nil), nil, Config{Notifiers: []ThresholdNotifier{n}})
	h.stats.s = &Summary{PID: &PIDStats{MaxPID: 100, NumProcesses: 5}}
	h.sync(t)
	if n.updates.Load() != 0 {
		t.Fatal("re-armed without memory stats")
	}
	h.stats.s = &Summary{AllocatableMemory: &MemoryStats{AvailableBytes: 1}}
	h.sync(t)
	if n.updates.Load() != 1 {
		t.Fatal("not re-armed with allocatable memory stats")
	}
}

func TestNewRejectsNilNotifier(t *testing.T) {
	_, err := New(Config{Stats: &FakeStats{}, ActivePods: func() []*v1.Pod { return nil },
		KillPod:   func(context.Context, *v1.Pod, v1.PodStatus, int64) error { return nil },
		Notifiers: []ThresholdNotifier{nil}})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

// Trigger never blocks, with or without Run, from many goroutines.
func TestTriggerNonBlocking(t *testing.T) {
	h := newHarness(t, nil, nil, Config{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				h.m.Trigger()
			}
		})
	}
	wg.Wait()
	if len(h.m.trigger) != 1 {
		t.Fatalf("pending triggers = %d, want 1", len(h.m.trigger))
	}
}
