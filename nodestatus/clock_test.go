package nodestatus

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// jumpClock is a clock whose wall time can jump while its timers keep real
// durations, as on a real machine when NTP (or a user) sets the time: Go's
// timers run on the monotonic clock. Now carries no monotonic reading and
// Since is a plain wall-clock difference, the harsher case (a real time.Now
// value would measure Since monotonically). Use it in a synctest bubble.
type jumpClock struct {
	clock.RealClock
	offset atomic.Int64
}

func (c *jumpClock) Now() time.Time                  { return time.Now().Round(0).Add(time.Duration(c.offset.Load())) }
func (c *jumpClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// jumpTo sets the wall time to t.
func (c *jumpClock) jumpTo(t time.Time) { c.offset.Store(int64(t.Sub(time.Now().Round(0)))) }

var clockJumps = []struct {
	name string
	to   func(now time.Time) time.Time
}{
	{"forward a year", func(now time.Time) time.Time { return now.AddDate(1, 0, 0) }},
	{"back to 1970", func(time.Time) time.Time { return time.Unix(0, 0) }},
}

// TestClockJumpStatusUpdates: after the wall clock jumps a year forward
// or back to 1970, the status is still computed every 10s (no stall, no
// tight loop) and the unchanged status is still reported every report
// period, carrying the clock's time as heartbeat.
func TestClockJumpStatusUpdates(t *testing.T) {
	for _, tc := range clockJumps {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &jumpClock{}
				sink := newRecordingSink(t)
				c := newTestController(t, clk, sink, &readyFlag{}, func(cfg *Config) {
					cfg.Rand = func() float64 { return 0 } // no jitter
					cfg.ReportFrequency = 5 * time.Minute
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				advance(35 * time.Second) // registered and Ready at 0s, syncs at 10s..30s
				synctest.Wait()
				_, g0, p0 := sink.counts()
				clk.jumpTo(tc.to(clk.Now()))
				advance(10*time.Minute + time.Second)
				synctest.Wait()
				_, g1, p1 := sink.counts()
				// 10 minutes at one sync per 10s: 60 syncs, each one cached read.
				if syncs := g1 - g0; syncs != 60 {
					t.Errorf("%d syncs in the 10 minutes after the jump, want 60", syncs)
				}
				// An unchanged status is reported every 5m (2.5m after a change,
				// with Rand 0): 2 to 5 reports in 10 minutes, none missed for
				// the jump and no report on every sync.
				if reports := p1 - p0; reports < 2 || reports > 5 {
					t.Errorf("%d status reports in the 10 minutes after the jump, want 2..5", reports)
				}
				node, err := sink.Local.Get(ctx, true)
				if err != nil {
					t.Fatal(err)
				}
				for _, cond := range node.Status.Conditions {
					if cond.Type == v1.NodeReady {
						if hb := clk.Since(cond.LastHeartbeatTime.Time); hb < 0 || hb > 6*time.Minute {
							t.Errorf("Ready heartbeat %v, %v before the clock's now", cond.LastHeartbeatTime, hb)
						}
						if cond.Status != v1.ConditionTrue {
							t.Errorf("Ready = %s after the jump", cond.Status)
						}
					}
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		})
	}
}

// TestClockJumpFastUpdates: a node that never becomes Ready gets fast
// updates (every 100ms) for FastUpdateTimeout of elapsed time, whatever
// the wall clock does meanwhile: a jump back must not make them go on
// forever, a jump forward must not end them early.
func TestClockJumpFastUpdates(t *testing.T) {
	for _, tc := range clockJumps {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &jumpClock{}
				sink := newRecordingSink(t)
				c := newTestController(t, clk, sink, &readyFlag{err: errors.New("never")}, func(cfg *Config) {
					cfg.FastUpdateTimeout = 20 * time.Second
					cfg.Rand = func() float64 { return 0 }
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				advance(time.Second)
				synctest.Wait()
				clk.jumpTo(tc.to(clk.Now()))
				advance(18 * time.Second) // 19s: still fast
				synctest.Wait()
				_, g0, _ := sink.counts()
				if g0 < 180 {
					t.Errorf("%d syncs in the first 19s, want ~190 (fast updates every 100ms)", g0)
				}
				advance(2 * time.Second) // fast phase over
				synctest.Wait()
				_, g1, _ := sink.counts()
				advance(5 * time.Minute)
				synctest.Wait()
				_, g2, _ := sink.counts()
				if syncs := g2 - g1; syncs != 30 {
					t.Errorf("%d syncs in 5 minutes after the fast phase, want 30 (every 10s)", syncs)
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		})
	}
}

// TestSyncOnceFakeClockJumpBack: on k8s.io/utils' fake clock, one sync at
// a time: after SetTime to 1970 the next sync reports (the last report is
// in the future), the following ones wait for the report period again.
func TestSyncOnceFakeClockJumpBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sink := newRecordingSink(t)
	c := newTestController(t, clk, sink, &readyFlag{}, nil)
	ctx := t.Context()
	sync := func() int {
		t.Helper()
		_, _, before := sink.counts()
		if err := c.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		_, _, after := sink.counts()
		return after - before
	}
	if n := sync(); n != 1 {
		t.Fatalf("first sync: %d patches", n)
	}
	clk.Step(DefaultUpdateFrequency)
	if n := sync(); n != 0 {
		t.Fatalf("heartbeat-only sync patched %d times", n)
	}
	clk.SetTime(time.Unix(0, 0))
	if n := sync(); n != 1 {
		t.Errorf("first sync after the jump back: %d patches, want 1", n)
	}
	clk.Step(DefaultUpdateFrequency)
	if n := sync(); n != 0 {
		t.Errorf("sync 10s after the jump: %d patches, want 0", n)
	}
	clk.Step(DefaultReportFrequency)
	if n := sync(); n != 1 {
		t.Errorf("sync a report period after the jump: %d patches, want 1", n)
	}
}
