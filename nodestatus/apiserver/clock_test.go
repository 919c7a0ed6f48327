package apiserver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
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

// TestLeaseClockJump: the wall clock jumps a year forward or back to 1970
// between renewals. Renewals go on every 10s (no stall, no tight loop),
// the lease is renewed in place (never recreated: nothing takes our own
// lease as expired), and its renew time grows with every renewal (the node
// lifecycle controller ignores a renew time that is not after the last one
// it saw); once the clock is right again the renew time follows it.
func TestLeaseClockJump(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   func(now time.Time) time.Time
	}{
		{"forward a year", func(now time.Time) time.Time { return now.AddDate(1, 0, 0) }},
		{"back to 1970", func(time.Time) time.Time { return time.Unix(0, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &jumpClock{}
				client := fake.NewClientset(leaseNode())
				var mu sync.Mutex
				var renewals []time.Time // renew times written, in order
				var at []time.Time       // when (bubble time)
				client.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
					var obj runtime.Object
					// CreateAction and UpdateAction both have GetObject.
					if a, ok := a.(clienttesting.CreateAction); ok {
						obj = a.GetObject()
					}
					if l, ok := obj.(*coordinationv1.Lease); ok {
						mu.Lock()
						renewals = append(renewals, l.Spec.RenewTime.Time)
						at = append(at, time.Now())
						mu.Unlock()
					}
					return false, nil, nil
				})
				l := newLease(t, client, clk, nil)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- l.Run(ctx) }()

				<-time.After(5 * time.Second)
				synctest.Wait()
				real := clk.Now()
				jumped := tc.to(real)
				clk.jumpTo(jumped)
				<-time.After(60 * time.Second) // renewals at 10s..60s
				synctest.Wait()
				clk.jumpTo(real.Add(60 * time.Second)) // the clock is right again
				<-time.After(20 * time.Second)         // renewals at 70s, 80s
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}

				mu.Lock()
				defer mu.Unlock()
				if len(renewals) != 9 {
					t.Fatalf("%d lease writes in 85s, want 9 (created at 0s, renewed every 10s): %v", len(renewals), renewals)
				}
				for i := 1; i < len(at); i++ {
					if gap := at[i].Sub(at[i-1]); gap != 10*time.Second {
						t.Errorf("renewal %d came %v after the one before, want 10s", i, gap)
					}
					if !renewals[i].After(renewals[i-1]) {
						t.Errorf("renew time %d = %v, not after %v", i, renewals[i], renewals[i-1])
					}
				}
				if v := verbs(client, "leases"); v[0] != "get" || v[1] != "create" || len(v) != 10 {
					t.Errorf("lease actions %v, want get, create, then only updates", v)
				}
				for _, v := range verbs(client, "leases")[2:] {
					if v != "update" {
						t.Errorf("lease actions %v: the lease was not just renewed", verbs(client, "leases"))
						break
					}
				}
				if tc.to(real).After(real) {
					// Forward: the renewals carry the clock's time.
					if got, want := renewals[1], jumped.Add(5*time.Second); !got.Equal(want) {
						t.Errorf("first renewal after the jump at %v, want %v", got, want)
					}
				}
				// Once the clock is right, renewals follow it again (forward: after
				// renewals a year ahead they keep growing by the elapsed time).
				last := renewals[len(renewals)-1]
				if tc.to(real).Before(real) && !last.Equal(real.Add(75*time.Second)) {
					t.Errorf("last renewal at %v, want the corrected clock's %v", last, real.Add(75*time.Second))
				}
				if lease := l.Latest(); lease == nil || *lease.Spec.HolderIdentity != nodeName || lease.Namespace != v1.NamespaceNodeLease {
					t.Errorf("latest lease %+v", lease)
				}
			})
		})
	}
}

// TestLeaseSyncOnceFakeClockJump: the same on k8s.io/utils' fake clock,
// one renewal at a time: after SetTime to 1970 the renewal lies one renew
// interval after the last one; after SetTime a year ahead it is the
// clock's time.
func TestLeaseSyncOnceFakeClockJump(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset(leaseNode())
	l := newLease(t, client, clk, nil)
	ctx := t.Context()
	renew := func() time.Time {
		t.Helper()
		if err := l.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		lease, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return lease.Spec.RenewTime.Time
	}
	if got := renew(); !got.Equal(t0) {
		t.Fatalf("created with %v, want %v", got, t0)
	}
	clk.SetTime(time.Unix(0, 0))
	if got, want := renew(), t0.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("renewal after the jump to 1970 = %v, want %v", got, want)
	}
	clk.Step(10 * time.Second)
	if got, want := renew(), t0.Add(20*time.Second); !got.Equal(want) {
		t.Errorf("next renewal = %v, want %v (10s on)", got, want)
	}
	year := t0.AddDate(1, 0, 0)
	clk.SetTime(year)
	if got := renew(); !got.Equal(year) {
		t.Errorf("renewal after the jump a year ahead = %v, want %v", got, year)
	}
	creates, updates := 0, 0
	for _, v := range verbs(client, "leases") {
		switch v {
		case "create":
			creates++
		case "update":
			updates++
		}
	}
	if creates != 1 || updates != 3 {
		t.Errorf("lease actions %v: %d creates, %d updates, want 1 and 3", verbs(client, "leases"), creates, updates)
	}
}
