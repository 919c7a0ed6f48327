package nodekit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	clocktesting "k8s.io/utils/clock/testing"
)

// With WithIdleMemoryRelease(true) the agent releases memory once when its
// node becomes idle (here: at start, with no pod); by default it does not.
func TestIdleMemoryReleaseWired(t *testing.T) {
	for _, on := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			released := 0
			b := NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
				WithLogger(zap.NewNop())
			if on {
				b.WithIdleMemoryRelease(true)
			}
			b.idleRelease = func() { released++ }
			a, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			<-time.After(3 * time.Minute) // many housekeeping rounds, all idle
			synctest.Wait()
			want := map[bool]int{true: 1, false: 0}[on]
			if released != want {
				t.Errorf("release on=%v: called %d times, want %d", on, released, want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// idleRelease releases at most once per idleReleaseMinInterval.
func TestIdleReleaseRateLimited(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	n := 0
	f := idleRelease(func() { n++ }, clk, zap.NewNop())
	f()
	clk.SetTime(clk.Now().Add(idleReleaseMinInterval - time.Second))
	f()
	if n != 1 {
		t.Fatalf("released %d times within the interval, want 1", n)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	f()
	if n != 2 {
		t.Fatalf("released %d times after the interval, want 2", n)
	}
}
