package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
)

// errUnreachable is what a client sees while the API server is down.
var errUnreachable = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")

// outage makes every request of client fail while down is set, and
// records the time of each request it fails.
type outage struct {
	down atomic.Bool
	mu   sync.Mutex
	hits []clienttesting.Action
	at   []time.Time
	clk  clock.PassiveClock
}

func newOutage(client *fake.Clientset, clk clock.PassiveClock) *outage {
	o := &outage{clk: clk}
	client.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !o.down.Load() {
			return false, nil, nil
		}
		o.mu.Lock()
		o.hits = append(o.hits, a)
		o.at = append(o.at, o.clk.Now())
		o.mu.Unlock()
		return true, nil, errUnreachable
	})
	return o
}

// failed returns the times of the failed requests with verb on resource.
func (o *outage) failed(verb, resource string) []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Time
	for i, a := range o.hits {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, o.at[i])
		}
	}
	return out
}

func (o *outage) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.hits)
}

// TestLeaseOutageBacksOffNeverGivesUp: while the API server is down for 10
// minutes the lease controller keeps trying, one request per round after
// the first failed renewal (5 update tries, then a read), rounds spaced
// 200ms doubling to 7s and staying at 7s; once the server is back the
// lease is renewed within 7s and then every 10s again.
func TestLeaseOutageBacksOffNeverGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(leaseNode())
		o := newOutage(client, clock.RealClock{})
		l := newLease(t, client, clock.RealClock{}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()

		renewTime := func() time.Time {
			lease, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return lease.Spec.RenewTime.Time
		}
		<-time.After(15 * time.Second)
		synctest.Wait()
		start := time.Now()
		if got := start.Sub(renewTime()); got != 5*time.Second {
			t.Fatalf("last renewal %v ago, want 5s (renewed at 0s and 10s)", got)
		}

		o.down.Store(true)
		<-time.After(10 * time.Minute)
		synctest.Wait()
		o.down.Store(false)
		back := time.Now()

		if n := len(o.failed("update", "leases")); n != DefaultLeaseRetries {
			t.Errorf("%d failed lease updates, want %d (one renewal's tries; later rounds only read)", n, DefaultLeaseRetries)
		}
		reads := o.failed("get", "leases")
		if len(reads) < 2 {
			t.Fatalf("only %d lease reads during the outage", len(reads))
		}
		// The first round is at 20s (5s into the outage); its read follows
		// the update tries at once.
		if got := reads[0].Sub(start); got != 5*time.Second {
			t.Errorf("first failed round %v into the outage, want 5s", got)
		}
		want := DefaultRetryBackoff
		for i := 1; i < len(reads); i++ {
			want = min(2*want, DefaultMaxRetryBackoff)
			if gap := reads[i].Sub(reads[i-1]); gap != want {
				t.Fatalf("gap %d between failed rounds = %v, want %v (reads %v)", i, gap, want, reads)
			}
		}
		if last := back.Sub(reads[len(reads)-1]); last > DefaultMaxRetryBackoff {
			t.Errorf("last try %v before the outage ended: the controller gave up", last)
		}
		if total, rounds := o.count(), len(reads); total != rounds+DefaultLeaseRetries {
			t.Errorf("%d requests in %d rounds: more than one request per round", total, rounds)
		}

		// Back: renewed within the back-off cap, then at the renew period.
		<-time.After(DefaultMaxRetryBackoff)
		synctest.Wait()
		first := renewTime()
		if !first.After(back) || first.Sub(back) > DefaultMaxRetryBackoff {
			t.Fatalf("lease renewed at %v after the return, want within %v", first.Sub(back), DefaultMaxRetryBackoff)
		}
		<-time.After(10 * time.Second)
		synctest.Wait()
		if got := renewTime().Sub(first); got != 10*time.Second {
			t.Errorf("next renewal %v after the first one back, want 10s", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestNodeStatusOutageSendsLatestOnce: status changes during an outage do
// not queue up: each sync during the outage fails after its 5 tries (one
// patch on the cached node, then reads: the cache is dropped after the
// failed patch, so later syncs only read), and once the server is back one
// sync sends one patch carrying the latest status.
func TestNodeStatusOutageSendsLatestOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	o := newOutage(client, clk)
	kernel := "k0"
	setters := append(nodestatus.DefaultSetters(nodestatus.SettersConfig{
		Clock: clk,
		Machine: nodestatus.MachineInfoConfig{Machine: func(context.Context) (*nodestatus.Machine, error) {
			return &nodestatus.Machine{NumCores: 2, MemoryCapacity: 4 << 30}, nil
		}},
	}), func(_ context.Context, n *v1.Node) error { n.Status.NodeInfo.KernelVersion = kernel; return nil })
	c, err := nodestatus.New(nodestatus.Config{NodeName: nodeName, Sink: newSink(t, client), Setters: setters, Clock: clk,
		Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}

	o.down.Store(true)
	const syncs = 30
	for i := 1; i <= syncs; i++ {
		kernel = fmt.Sprintf("k%d", i)
		clk.Step(nodestatus.DefaultUpdateFrequency)
		if err := c.SyncOnce(ctx); !errors.Is(err, nodestatus.ErrUpdateRetries) {
			t.Fatalf("sync %d during the outage: %v", i, err)
		}
	}
	if n := len(o.failed("patch", "nodes")); n != 1 {
		t.Errorf("%d patches tried during the outage, want 1 (later syncs have no cached node to patch)", n)
	}
	if n := o.count(); n > syncs*nodestatus.DefaultUpdateRetries {
		t.Errorf("%d requests in %d syncs: more than %d per sync", n, syncs, nodestatus.DefaultUpdateRetries)
	}

	o.down.Store(false)
	client.ClearActions()
	clk.Step(nodestatus.DefaultUpdateFrequency)
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatalf("first sync back: %v", err)
	}
	patches := 0
	for _, v := range verbs(client, "nodes") {
		if v == "patch/status" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d patches after the return (%v), want 1", patches, verbs(client, "nodes"))
	}
	stored, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Status.NodeInfo.KernelVersion; got != fmt.Sprintf("k%d", syncs) {
		t.Errorf("stored kernel %q, want the latest k%d", got, syncs)
	}
	client.ClearActions()
	clk.Step(nodestatus.DefaultUpdateFrequency)
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if v := verbs(client, "nodes"); len(v) != 0 {
		t.Errorf("second sync back made calls %v, want none (nothing changed)", v)
	}
}
