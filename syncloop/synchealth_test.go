package syncloop

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// TestSyncLoopHealthy: healthy before the first iteration and within five
// minutes of the last one began; unhealthy after; healthy again once an
// iteration begins.
func TestSyncLoopHealthy(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	l, _, updates := ltStubLoop(t, clk, nil)
	if err := l.SyncLoopHealthy(); err != nil {
		t.Fatalf("before any iteration: %v", err)
	}
	iterate := func() {
		updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.SourceFile}
		if !l.Iterate(t.Context()) {
			t.Fatal("Iterate returned false")
		}
	}
	iterate()
	clk.Step(SyncLoopHealthyAfter)
	if err := l.SyncLoopHealthy(); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	clk.Step(time.Second)
	if err := l.SyncLoopHealthy(); err == nil {
		t.Fatal("healthy after five minutes without an iteration")
	}
	iterate()
	if err := l.SyncLoopHealthy(); err != nil {
		t.Fatalf("after a new iteration: %v", err)
	}
}
