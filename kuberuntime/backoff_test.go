package kuberuntime

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testInitial = 10 * time.Second
	testMax     = 300 * time.Second
)

var (
	jumpNow   = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	jumpEpoch = time.Unix(0, 0).UTC()
)

// heldFor steps the clock by a second until check reports no back-off and
// returns how long that took; it gives up (returning more than limit) after
// limit.
func heldFor(clk *clocktesting.FakeClock, limit time.Duration, check func() bool) time.Duration {
	var waited time.Duration
	for check() {
		if waited > limit {
			return waited
		}
		clk.Step(time.Second)
		waited += time.Second
	}
	return waited
}

// crashLoop records n crashes of key, each finishing at the clock's time
// and restarted once its back-off ends.
func crashLoop(t *testing.T, b *backoff, clk *clocktesting.FakeClock, key string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		finished := clk.Now()
		if in, _ := b.inBackOffSince(key, finished); in && i == 0 {
			t.Fatalf("in back-off before the first crash")
		}
		heldFor(clk, testMax, func() bool { in, _ := b.inBackOffSince(key, finished); return in })
		b.next(key, finished, "")
		clk.Step(time.Second) // the new instance runs a second, then crashes
	}
}

func TestCrashBackoffClockJumps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Time
		jumps []time.Time // applied after the crash loop reached max
	}{
		{"forward a year then back", jumpNow, []time.Time{jumpNow.AddDate(1, 0, 0), jumpNow.Add(time.Hour)}},
		{"booted in 1970, NTP sets now", jumpEpoch, []time.Time{jumpNow}},
		{"back to 1970", jumpNow, []time.Time{jumpEpoch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(tc.start)
			b := newBackoff(clk, testInitial, testMax)
			const key = "pod/c"
			crashLoop(t, b, clk, key, 8) // delay at max
			for _, j := range tc.jumps {
				// The container crashed just before the jump.
				finished := clk.Now()
				if in, _ := b.inBackOffSince(key, finished); !in {
					t.Fatal("fresh crash not in back-off")
				}
				b.next(key, finished, "")
				clk.SetTime(j)
				if held := heldFor(clk, 2*testMax, func() bool { in, _ := b.inBackOffSince(key, finished); return in }); held > testMax {
					t.Fatalf("after the jump to %v the container was held %v (> max %v)", j, held, testMax)
				}
				// It keeps crashing at the new time: still bounded.
				crashLoop(t, b, clk, key, 3)
				finished = clk.Now()
				b.next(key, finished, "")
				if held := heldFor(clk, 2*testMax, func() bool { in, _ := b.inBackOffSince(key, finished); return in }); held > testMax {
					t.Fatalf("crash after the jump held %v", held)
				}
			}
		})
	}
}

// A container that finished "in the future" (the clock was set back after
// it exited) waits at most its delay from when that was noticed, also when
// the clock goes back again meanwhile.
func TestCrashBackoffEventInFuture(t *testing.T) {
	clk := clocktesting.NewFakeClock(jumpNow)
	b := newBackoff(clk, testInitial, testMax)
	finished := jumpNow.AddDate(1, 0, 0)
	b.next("k", finished, "") // recorded at jumpNow, a year before finished
	clk.SetTime(finished.Add(-time.Minute))
	b2 := newBackoff(clk, testInitial, testMax)
	b2.next("k", finished, "") // lastUpdate = now, a minute before finished
	in, d := b2.inBackOffSince("k", finished)
	if !in || d != testInitial {
		t.Fatalf("in back-off = %v, %v", in, d)
	}
	clk.Step(testInitial / 2)
	clk.SetTime(clk.Now().Add(-time.Second)) // back again
	held := heldFor(clk, 2*testMax, func() bool { in, _ := b2.inBackOffSince("k", finished); return in })
	if held > testInitial {
		t.Fatalf("held %v, want at most %v", held, testInitial)
	}
	// The far-future entry of b is simply forgotten.
	if in, _ := b.inBackOffSince("k", finished); in {
		held := heldFor(clk, 2*testMax, func() bool { in, _ := b.inBackOffSince("k", finished); return in })
		if held > testMax {
			t.Fatalf("held %v", held)
		}
	}
}

func TestImageBackoffClockJumps(t *testing.T) {
	for _, tc := range []struct {
		name        string
		start, jump time.Time
	}{
		{"forward a year then back", jumpNow.AddDate(1, 0, 0), jumpNow},
		{"booted in 1970, NTP sets now", jumpEpoch, jumpNow},
		{"back to 1970", jumpNow, jumpEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(tc.start)
			b := newBackoff(clk, testInitial, testMax)
			const key = "uid/image"
			for i := 0; i < 8; i++ { // pulls keep failing: delay at max
				heldFor(clk, testMax, func() bool { in, _, _ := b.inBackOffSinceUpdate(key); return in })
				b.next(key, clk.Now(), "pull failed")
			}
			in, d, msg := b.inBackOffSinceUpdate(key)
			if !in || d != testMax || msg != "pull failed" {
				t.Fatalf("before the jump: %v %v %q", in, d, msg)
			}
			clk.SetTime(tc.jump)
			if held := heldFor(clk, 2*testMax, func() bool { in, _, _ := b.inBackOffSinceUpdate(key); return in }); held > testMax {
				t.Fatalf("held %v after the jump", held)
			}
			b.next(key, clk.Now(), "again")
			if in, _, _ := b.inBackOffSinceUpdate(key); !in {
				t.Fatal("a failure after the jump is not backed off")
			}
			if held := heldFor(clk, 2*testMax, func() bool { in, _, _ := b.inBackOffSinceUpdate(key); return in }); held > testMax {
				t.Fatalf("held %v", held)
			}
		})
	}
}

// Without jumps the delays double up to max and an idle key is forgotten.
func TestBackoffDoublesAndExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(jumpNow)
	b := newBackoff(clk, testInitial, testMax)
	want := testInitial
	for i := 0; i < 8; i++ {
		b.next("k", clk.Now(), "")
		if _, d, _ := b.inBackOffSinceUpdate("k"); d != want {
			t.Fatalf("crash %d: delay %v, want %v", i, d, want)
		}
		want = min(2*want, testMax)
	}
	clk.Step(2*testMax + time.Second)
	b.gc()
	if b.len() != 0 {
		t.Fatalf("%d entries after gc", b.len())
	}
	// gc also drops an entry left "in the future" by a backward jump.
	b.next("k", clk.Now(), "")
	clk.SetTime(jumpEpoch)
	b.gc()
	if b.len() != 0 {
		t.Fatalf("%d entries after a jump back and gc", b.len())
	}
}
