package syncloop

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// Config.Idle is called once each time housekeeping finds the node idle
// after it was not: no desired pod, none known to the pod workers, none in
// the runtime (a dead container left for container GC counts).
func TestHousekeepingIdle(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	calls := 0
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) { c.Idle = func() { calls++ } })
	step := func(want int, what string) {
		t.Helper()
		if err := l.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		if calls != want {
			t.Fatalf("%s: Idle called %d times, want %d", what, calls, want)
		}
	}
	dead := []*kubetypes.Pod{{ID: "gone", Name: "g",
		Containers: []*kubetypes.Container{{ID: "c0", State: kubetypes.ContainerStateExited}}}}

	stub.mu.Lock()
	stub.pods = dead
	stub.mu.Unlock()
	step(0, "a dead container in the runtime")
	stub.mu.Lock()
	stub.pods = nil
	stub.mu.Unlock()
	step(1, "the runtime emptied")
	step(1, "still idle")

	l.HandlePodAdditions([]*v1.Pod{ltPod("1", "web", 0)})
	step(1, "a desired pod")
	l.HandlePodRemoves([]*v1.Pod{ltPod("1", "web", 0)})
	for range 20 {
		if err := l.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, known := ltWorkerState(l.PodWorkers(), "1")
		if calls == 2 {
			if known {
				t.Fatal("Idle called while the pod workers know the pod")
			}
			step(2, "still idle")
			return
		}
		if !known {
			t.Fatalf("the pod workers forgot the pod and Idle was called %d times, want 2", calls)
		}
	}
	t.Fatal("the removed pod never went")
}
