package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
}

// writes counts the create and patch calls on events.
type writes struct{ creates, patches atomic.Int64 }

func (w *writes) watch(cs *fake.Clientset) {
	cs.PrependReactor("*", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create":
			w.creates.Add(1)
		case "patch":
			w.patches.Add(1)
		}
		return false, nil, nil
	})
}

func newRecorder(t *testing.T, cs *fake.Clientset, edit func(*Config)) *Recorder {
	t.Helper()
	cfg := Config{Client: cs, NodeName: "node-1", Clock: clock.RealClock{}}
	if edit != nil {
		edit(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs r until the returned stop is called.
func run(t *testing.T, r *Recorder) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func storedEvents(t *testing.T, cs *fake.Clientset, ns string) []v1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestThousandRestartsFewEvents: a container restarted 1,000 times (its
// Created, Started and BackOff events every 10 s, 3,000 calls) leaves a
// handful of events in the API server, counted, in far fewer writes: the
// correlator's aggregation and spam filter, as the kubelet's.
func TestThousandRestartsFewEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		var w writes
		w.watch(cs)
		r := newRecorder(t, cs, nil)
		stop := run(t, r)
		pod := testPod()
		ref := kubetypes.ContainerRef(pod, "app")
		for range 1000 {
			r.Event(ref, v1.EventTypeNormal, kubetypes.ReasonCreated, "Container created")
			r.Event(ref, v1.EventTypeNormal, kubetypes.ReasonStarted, "Container started")
			r.Event(ref, v1.EventTypeWarning, kubetypes.ReasonBackOff, "Back-off restarting failed container app in pod web_ns(uid-web)")
			synctest.Wait()
			<-time.After(10 * time.Second)
		}
		synctest.Wait()
		stop()
		stored := storedEvents(t, cs, "ns")
		var summary []string
		var backoffCount int32
		for _, e := range stored {
			summary = append(summary, fmt.Sprintf("%s x%d", e.Reason, e.Count))
			if e.Reason == "BackOff" {
				backoffCount = e.Count
			}
		}
		t.Logf("stored %v in %d creates and %d patches; dropped: filtered %d", summary, w.creates.Load(), w.patches.Load(), r.Dropped(DropFiltered))
		if len(stored) > 5 {
			t.Errorf("%d events stored, want a handful: %v", len(stored), summary)
		}
		if n := w.creates.Load() + w.patches.Load(); n > 200 {
			t.Errorf("%d writes for 3,000 events", n)
		}
		if backoffCount <= 1 {
			t.Errorf("BackOff count %d, want it counted above 1", backoffCount)
		}
		if r.Dropped(DropFiltered) == 0 {
			t.Error("the spam filter dropped nothing")
		}
		for _, e := range stored {
			if e.Source.Component != "kubelet" || e.Source.Host != "node-1" || e.InvolvedObject.FieldPath != "spec.containers{app}" ||
				e.ReportingController != "kubelet" || e.ReportingInstance != "node-1" {
				t.Errorf("event %+v", e)
			}
		}
	})
}

// TestNodeEventsGoToDefault: a node event (no namespace) is stored in
// "default", as client-go does.
func TestNodeEventsGoToDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		r := newRecorder(t, cs, nil)
		stop := run(t, r)
		r.Eventf(kubetypes.NodeRef("node-1"), v1.EventTypeNormal, kubetypes.ReasonStarting, "Starting %s.", "kubelet")
		r.Event(nil, v1.EventTypeNormal, "X", "no object")
		synctest.Wait()
		stop()
		ev := storedEvents(t, cs, "default")
		if len(ev) != 1 || ev[0].Reason != "Starting" || ev[0].Message != "Starting kubelet." || ev[0].InvolvedObject.Kind != "Node" {
			t.Fatalf("stored %+v", ev)
		}
		if r.Dropped(DropNoReference) != 1 || r.Sent() != 1 {
			t.Errorf("no_reference %d sent %d", r.Dropped(DropNoReference), r.Sent())
		}
	})
}

// TestHangingAPIServerNeverBlocks: with every write hanging, Event returns
// at once; past the queue events are dropped and counted (queue_full).
func TestHangingAPIServerNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		release := make(chan struct{})
		cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			<-release
			return true, nil, errors.New("timeout")
		})
		reg := prometheus.NewRegistry()
		r := newRecorder(t, cs, func(c *Config) { c.QueueSize = 10; c.Registerer = reg })
		stop := run(t, r)
		synctest.Wait() // the sender waits for the first event
		pod := testPod()
		start := time.Now()
		for i := range 100 {
			r.Eventf(pod, v1.EventTypeWarning, "R", "event %d", i)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("100 events took %v of (virtual) time with the API server hanging", d)
		}
		synctest.Wait()
		// One is in the hanging write, 10 queued, the rest dropped.
		if got := r.Dropped(DropQueueFull); got != 89 {
			t.Errorf("queue_full %d, want 89", got)
		}
		if got := testutil.ToFloat64(r.droppedVec.WithLabelValues(DropQueueFull)); got != 89 {
			t.Errorf("nodekit_events_dropped_total{reason=queue_full} = %v", got)
		}
		close(release)
		synctest.Wait()
		stop()
	})
}

// TestUnreachableAPIServerDropsAndSendsNoBacklog: while writes fail each
// event gets one try, then the sender backs off (1s, 2s, 4s ...) and the
// failure is counted; when the API server is back after two minutes the
// events queued during the outage are too old and dropped: no backlog is
// sent, new events are.
func TestUnreachableAPIServerDropsAndSendsNoBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		var down atomic.Bool
		down.Store(true)
		var mu sync.Mutex
		var tries []time.Time
		cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			tries = append(tries, time.Now())
			mu.Unlock()
			if down.Load() {
				return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
			}
			return false, nil, nil
		})
		r := newRecorder(t, cs, nil)
		stop := run(t, r)
		pod := testPod()
		t0 := time.Now()
		for i := range 120 { // one distinct event a second for two minutes
			r.Eventf(pod, v1.EventTypeWarning, "Outage", "event %d", i)
			<-time.After(time.Second)
		}
		synctest.Wait()
		mu.Lock()
		var gaps []time.Duration
		for i := 1; i < len(tries) && i < 6; i++ {
			gaps = append(gaps, tries[i].Sub(tries[i-1]))
		}
		n := len(tries)
		mu.Unlock()
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
		if fmt.Sprint(gaps) != fmt.Sprint(want) {
			t.Errorf("tries %v apart, want %v (back-off)", gaps, want)
		}
		if n > 12 || r.Dropped(DropSendFailed) != uint64(n) {
			t.Errorf("%d tries in 2 minutes, send_failed %d", n, r.Dropped(DropSendFailed))
		}
		down.Store(false)
		<-time.After(DefaultMaxBackoff) // the sender's back-off ends
		synctest.Wait()
		if r.Dropped(DropTooOld) == 0 {
			t.Error("nothing dropped as too old")
		}
		for _, e := range storedEvents(t, cs, "ns") {
			if age := e.LastTimestamp.Sub(t0); age < 2*time.Minute-DefaultMaxAge-DefaultMaxBackoff {
				t.Errorf("backlog sent: %s from %v after the start", e.Message, age)
			}
		}
		r.Event(pod, v1.EventTypeNormal, "Back", "after the outage")
		synctest.Wait()
		stop()
		found := false
		for _, e := range storedEvents(t, cs, "ns") {
			found = found || e.Reason == "Back"
		}
		if !found {
			t.Error("an event after the outage was not sent")
		}
		if q := r.Queued(); q != 0 {
			t.Errorf("%d events still queued", q)
		}
	})
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{QPS: -1, QueueSize: -1, MaxAge: -time.Second})
	for _, f := range []string{"Client", "NodeName", "QPS", "QueueSize", "MaxAge"} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), f) {
			t.Errorf("New = %v: %s not named", err, f)
		}
	}
	r, err := New(Config{Client: fake.NewClientset(), NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run = %v", err)
	}
}

func TestTokenBucket(t *testing.T) {
	b := tokenBucket{qps: 50, burst: 100, tokens: 100}
	now := time.Unix(0, 0)
	for i := range 100 {
		if w := b.take(now); w != 0 {
			t.Fatalf("token %d: wait %v within the burst", i, w)
		}
	}
	if w := b.take(now); w != 20*time.Millisecond {
		t.Fatalf("after the burst: wait %v, want 20ms", w)
	}
	if w := b.take(now.Add(20 * time.Millisecond)); w != 0 {
		t.Fatalf("after 20ms: wait %v", w)
	}
}
