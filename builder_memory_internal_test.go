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

// idleRelease releases once per idle stretch, after the node has been
// idle for idleReleaseSettle, and at most once per idleReleaseMinInterval;
// a stretch that began within the interval is released when the interval
// is up (it used to be skipped for good, leaving the freed heap of a
// churn that ended less than a minute after the last release).
func TestIdleReleaseRateLimited(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	n := 0
	f := idleRelease(func() { n++ }, clk, zap.NewNop())
	at := func(d time.Duration, since time.Time, want int, what string) {
		t.Helper()
		clk.SetTime(t0.Add(d))
		f(since)
		if n != want {
			t.Fatalf("%s: released %d times, want %d", what, n, want)
		}
	}
	at(0, t0, 0, "idle since now")
	at(idleReleaseSettle-time.Second, t0, 0, "not settled")
	at(idleReleaseSettle, t0, 1, "settled")
	at(idleReleaseSettle+2*time.Second, t0, 1, "the same stretch")
	at(10*time.Minute, t0, 1, "the same stretch, much later")

	// A new stretch 30 s after a release: released once the minute is up.
	at(10*time.Minute+30*time.Second, t0.Add(10*time.Minute+20*time.Second), 2, "a new stretch, settled")
	s2 := t0.Add(10*time.Minute + 40*time.Second)
	at(10*time.Minute+50*time.Second, s2, 2, "a stretch within the minute")
	at(11*time.Minute+29*time.Second, s2, 2, "still within the minute")
	at(11*time.Minute+30*time.Second, s2, 3, "the minute up, still idle")
	at(11*time.Minute+32*time.Second, s2, 3, "the same stretch")
}
