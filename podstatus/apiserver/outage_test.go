package apiserver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podstatus"
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

// TestPodStatusOutageSendsLatestOnly: the StatusManager with the API
// server's PodStatusSink: statuses set during an outage are not queued;
// after the return one sync patches each pod once, with its latest status.
func TestPodStatusOutageSendsLatestOnly(t *testing.T) {
	pods := []*v1.Pod{apiPod("a", "uid-a"), apiPod("b", "uid-b")}
	sink, client := newPodSink(t, pods...)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := newOutage(client, clk)
	m, err := podstatus.New(podstatus.Config{Sink: sink, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	status := func(i int) v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodRunning, Message: fmt.Sprintf("v%d", i),
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Image: "busybox", ContainerID: "containerd://c1",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}}}}}
	}
	for _, p := range pods {
		m.SetPodStatus(p, status(0))
	}
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}

	o.down.Store(true)
	const versions = 10
	for i := 1; i <= versions; i++ {
		for _, p := range pods {
			m.SetPodStatus(p, status(i))
		}
		clk.Step(time.Second)
		if err := m.SyncOnce(ctx); !errors.Is(err, podstatus.ErrSink) {
			t.Fatalf("sync %d during the outage: %v", i, err)
		}
	}
	if err := m.ResyncAll(ctx); !errors.Is(err, podstatus.ErrSink) {
		t.Fatalf("resync during the outage: %v", err)
	}
	if n := len(o.failed("patch", "pods")); n != 0 {
		t.Errorf("%d patches tried during the outage (the read fails first)", n)
	}
	if n, most := o.count(), (versions+1)*len(pods); n > most {
		t.Errorf("%d requests during the outage, want at most one per pod per sync (%d)", n, most)
	}

	o.down.Store(false)
	client.ClearActions()
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatalf("first sync back: %v", err)
	}
	if n := len(actionsOf(client, "patch")); n != len(pods) {
		t.Errorf("%d patches after the return, want one per pod (%d)", n, len(pods))
	}
	for _, p := range pods {
		if got := getPod(t, client, p.Name).Status.Message; got != fmt.Sprintf("v%d", versions) {
			t.Errorf("pod %s status %q in the API, want the latest v%d", p.Name, got, versions)
		}
	}
	client.ClearActions()
	if err := m.ResyncAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(client, "patch")); n != 0 {
		t.Errorf("resync after catching up patched %d times, want 0", n)
	}
}

const nodeName = "node-1"
