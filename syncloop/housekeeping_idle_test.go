package syncloop

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// Config.Idle is called by each housekeeping round that finds the node
// idle (no desired pod, none known to the pod workers, none in the runtime:
// a dead container left for container GC counts), with when that idle
// stretch began: the same time until a round finds the node busy.
func TestHousekeepingIdle(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	var sinces []time.Time
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) { c.Idle = func(since time.Time) { sinces = append(sinces, since) } })
	// stretches: the distinct since values seen, in order.
	stretches := func() []time.Time {
		var out []time.Time
		for _, s := range sinces {
			if len(out) == 0 || !out[len(out)-1].Equal(s) {
				out = append(out, s)
			}
		}
		return out
	}
	// step runs a round and checks the stretches seen so far and whether
	// this round called Idle.
	step := func(want int, called bool, what string) {
		t.Helper()
		before := len(sinces)
		clk.Step(2 * time.Second)
		if err := l.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := len(sinces) > before; got != called {
			t.Fatalf("%s: Idle called = %v, want %v", what, got, called)
		}
		if n := len(stretches()); n != want {
			t.Fatalf("%s: %d idle stretches seen (%v), want %d", what, n, sinces, want)
		}
	}
	dead := []*kubetypes.Pod{{ID: "gone", Name: "g",
		Containers: []*kubetypes.Container{{ID: "c0", State: kubetypes.ContainerStateExited}}}}

	stub.mu.Lock()
	stub.pods = dead
	stub.mu.Unlock()
	step(0, false, "a dead container in the runtime")
	stub.mu.Lock()
	stub.pods = nil
	stub.mu.Unlock()
	step(1, true, "the runtime emptied")
	first := sinces[0]
	if !first.Equal(clk.Now()) {
		t.Fatalf("the first idle round passed since %v, want its own start %v", first, clk.Now())
	}
	step(1, true, "still idle")
	step(1, true, "still idle")

	l.HandlePodAdditions([]*v1.Pod{ltPod("1", "web", 0)})
	step(1, false, "a desired pod")
	l.HandlePodRemoves([]*v1.Pod{ltPod("1", "web", 0)})
	for range 20 {
		before := len(sinces)
		clk.Step(2 * time.Second)
		if err := l.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, known := ltWorkerState(l.PodWorkers(), "1")
		if len(sinces) > before {
			if known {
				t.Fatal("Idle called while the pod workers know the pod")
			}
			if s := stretches(); len(s) != 2 || !s[1].Equal(clk.Now()) {
				t.Fatalf("after the pod went: idle stretches %v, want 2, the second from %v", s, clk.Now())
			}
			step(2, true, "still idle")
			return
		}
		if !known {
			t.Fatalf("the pod workers forgot the pod and Idle was not called (stretches %v)", stretches())
		}
	}
	t.Fatal("the removed pod never went")
}
