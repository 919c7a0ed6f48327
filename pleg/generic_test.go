package pleg

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

const (
	running = kubetypes.ContainerStateRunning
	exited  = kubetypes.ContainerStateExited
	created = kubetypes.ContainerStateCreated
	unknown = kubetypes.ContainerStateUnknown
)

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{RelistPeriod: -1, ChannelCapacity: -2})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Runtime", "RelistPeriod", "ChannelCapacity"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}

func TestNewValidates(t *testing.T) {
	rt := newStub()
	for name, cfg := range map[string]Config{
		"Runtime":             {},
		"RelistPeriod":        {Runtime: rt, RelistPeriod: -1},
		"RelistThreshold":     {Runtime: rt, RelistPeriod: time.Minute, RelistThreshold: time.Second},
		"ChannelCapacity":     {Runtime: rt, ChannelCapacity: -1},
		"RelistQueueCapacity": {Runtime: rt, RelistQueueCapacity: -3},
	} {
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	g, err := New(Config{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if cap(g.events) != DefaultChannelCapacity || g.period != DefaultRelistPeriod || g.threshold != DefaultRelistThreshold || g.Cache() == nil {
		t.Fatalf("defaults not filled: cap %d period %v threshold %v", cap(g.events), g.period, g.threshold)
	}
	if rt.lists() != 0 {
		t.Fatal("New must not talk to the runtime")
	}
}

func TestRelisting(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()

	// Nothing listed, nothing sent.
	f.relist(t)
	expectEvents(t, ch)

	f.rt.setPods(
		pod("1234", ctr("c1", exited), ctr("c2", running), ctr("c3", unknown)),
		pod("4567", ctr("c1", exited)),
	)
	f.relist(t)
	// c3 went to unknown: no event (ContainerChanged is never sent).
	expectEvents(t, ch, "1234/ContainerDied/c1", "1234/ContainerStarted/c2", "4567/ContainerDied/c1")

	// The same listing again: silence.
	f.relist(t)
	expectEvents(t, ch)

	// c2 exits, c3 starts, c4 appears created, pod 4567 vanishes with its
	// exited container.
	f.rt.setPods(pod("1234", ctr("c2", exited), ctr("c3", running), ctr("c4", created)))
	f.relist(t)
	expectEvents(t, ch,
		"1234/ContainerRemoved/c1", // c1 was exited: only removed
		"1234/ContainerDied/c2",
		"1234/ContainerStarted/c3",
		"4567/ContainerRemoved/c1",
	)
	// created and unknown are the same state for events.
	f.rt.setPods(pod("1234", ctr("c2", exited), ctr("c3", running), ctr("c4", unknown)))
	f.relist(t)
	expectEvents(t, ch)
}

func TestRelistingWithSandboxes(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(
		withSandboxes(pod("p1"), ctr("s1", running)),
		withSandboxes(pod("p2"), ctr("s2", exited), ctr("s3", running)),
	)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerStarted/s1", "p2/ContainerDied/s2", "p2/ContainerStarted/s3")

	f.rt.setPods(
		withSandboxes(pod("p1"), ctr("s1", exited)),
		withSandboxes(pod("p2"), ctr("s3", running)),
	)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerDied/s1", "p2/ContainerRemoved/s2")
}

func TestEventChannelFull(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ChannelCapacity = 4 })
	f.rt.setPods(
		pod("1234", ctr("c1", exited), ctr("c2", running), ctr("c3", unknown)),
		pod("4567", ctr("c1", exited)),
	)
	f.relist(t)
	_ = drain(f.g.Watch())

	// Five events are due; the channel takes four.
	f.rt.setPods(pod("1234", ctr("c2", exited), ctr("c3", running), ctr("c4", running)))
	f.relist(t)
	all := []string{"1234/ContainerRemoved/c1", "1234/ContainerDied/c2", "1234/ContainerStarted/c3", "1234/ContainerStarted/c4", "4567/ContainerRemoved/c1"}
	got := drain(f.g.Watch())
	if len(got) != 4 {
		t.Fatalf("got %d events %v, want 4", len(got), got)
	}
	for _, e := range got {
		if !slices.Contains(all, e) {
			t.Errorf("unexpected event %s", e)
		}
	}
	if f.g.DroppedEvents() != 1 {
		t.Fatalf("dropped %d, want 1", f.g.DroppedEvents())
	}
}

func TestDetectingContainerDeaths(t *testing.T) {
	for _, tc := range []struct {
		from kubetypes.ContainerState
		want []string
	}{
		{running, []string{"p/ContainerDied/c1", "p/ContainerRemoved/c1"}},
		{unknown, []string{"p/ContainerDied/c1", "p/ContainerRemoved/c1"}},
		{created, []string{"p/ContainerDied/c1", "p/ContainerRemoved/c1"}},
		{exited, []string{"p/ContainerRemoved/c1"}},
	} {
		t.Run(string(tc.from), func(t *testing.T) {
			f := newFixture(t, nil)
			f.rt.setPods(pod("p", ctr("c1", tc.from), ctr("c2", running)))
			f.relist(t)
			_ = drain(f.g.Watch())

			// c1 vanishes between two relists.
			f.rt.setPods(pod("p", ctr("c2", running)))
			f.relist(t)
			expectEvents(t, f.g.Watch(), tc.want...)

			// The whole pod vanishes.
			f.rt.setPods()
			f.relist(t)
			expectEvents(t, f.g.Watch(), "p/ContainerDied/c2", "p/ContainerRemoved/c2")
		})
	}
}

func TestRelistWithCache(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(pod("p", ctr("c1", exited), ctr("c2", running)))
	boom := errors.New("status unavailable")
	f.rt.setStatus("p", nil, boom)

	f.relist(t)
	// The status could not be read: the error is cached, nothing is sent.
	expectEvents(t, ch)
	st, err := f.g.Cache().Get("p")
	if !errors.Is(err, boom) || st != nil {
		t.Fatalf("cache: %v %v, want nil and %v", st, err, boom)
	}

	// The runtime recovers: the same changes are detected again.
	want := &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", ContainerStatuses: []*kubetypes.ContainerStatus{{ID: "c2", State: running}}}
	f.rt.setStatus("p", want, nil)
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch, "p/ContainerDied/c1", "p/ContainerStarted/c2")
	st, err = f.g.Cache().Get("p")
	if err != nil || st.ID != "p" || len(st.ContainerStatuses) != 1 || !st.TimeStamp.Equal(f.clock.Now()) {
		t.Fatalf("cache: %+v %v", st, err)
	}
}

func TestRemoveCacheEntry(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	if st, _ := f.g.Cache().Get("p"); len(st.ContainerStatuses) != 1 {
		t.Fatalf("not cached: %+v", st)
	}
	f.rt.setPods()
	f.relist(t)
	st, err := f.g.Cache().Get("p")
	if err != nil || st.ID != "p" || st.ContainerStatuses != nil || st.Name != "" {
		t.Fatalf("after removal: %+v %v, want an empty status", st, err)
	}
}

func TestHealthy(t *testing.T) {
	f := newFixture(t, nil)
	if ok, err := f.g.Healthy(); ok || !errors.Is(err, ErrNotHealthy) {
		t.Fatalf("before any relist: %v %v", ok, err)
	}
	f.relist(t)
	if ok, err := f.g.Healthy(); !ok || err != nil {
		t.Fatalf("after a relist: %v %v", ok, err)
	}
	f.clock.Step(time.Minute)
	if ok, _ := f.g.Healthy(); !ok {
		t.Fatal("1m after a relist: unhealthy")
	}
	f.clock.Step(2*time.Minute + time.Second)
	if ok, err := f.g.Healthy(); ok || !errors.Is(err, ErrNotHealthy) {
		t.Fatalf("3m1s after a relist: %v %v", ok, err)
	}
	// A failed listing does not count.
	f.rt.podsErr = errors.New("down")
	if err := f.g.Relist(t.Context()); !errors.Is(err, ErrRelist) {
		t.Fatalf("relist error: %v", err)
	}
	if ok, _ := f.g.Healthy(); ok {
		t.Fatal("a failed relist made it healthy")
	}
	f.rt.podsErr = nil
	f.relist(t)
	if ok, _ := f.g.Healthy(); !ok {
		t.Fatal("unhealthy after a good relist")
	}
}

func TestGetPodsErrorChangesNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	_ = drain(f.g.Watch())
	before := f.g.LastRelist()

	f.rt.setPods()
	f.rt.podsErr = errors.New("down")
	f.clock.Step(time.Second)
	if err := f.g.Relist(t.Context()); err == nil {
		t.Fatal("no error")
	}
	expectEvents(t, f.g.Watch())
	if !f.g.LastRelist().Equal(before) {
		t.Fatal("last relist time moved")
	}
	if st, _ := f.g.Cache().Get("p"); len(st.ContainerStatuses) != 1 {
		t.Fatal("cache changed")
	}
	// Recovery sees the pod gone.
	f.rt.podsErr = nil
	f.relist(t)
	expectEvents(t, f.g.Watch(), "p/ContainerDied/c1", "p/ContainerRemoved/c1")
}

func TestReinspect(t *testing.T) {
	boom := errors.New("fail")
	for _, tc := range []struct {
		name            string
		request         bool // RequestReinspect before the relist
		statusErr       error
		podDeleted      bool
		wantStatusCalls int
		wantFlag        bool // flag still set after the relist
		wantEvents      []string
	}{
		{name: "requested, success", request: true, wantStatusCalls: 1, wantEvents: []string{"p/PodSync"}},
		{name: "requested, failure", request: true, statusErr: boom, wantStatusCalls: 1, wantFlag: true},
		{name: "not requested", wantStatusCalls: 0},
		{name: "requested, pod deleted", request: true, podDeleted: true, wantEvents: []string{"p/PodSync"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			// No containers: only the flag can cause a status read.
			f.rt.setPods(pod("p"))
			f.relist(t)
			_ = drain(f.g.Watch())
			calls := f.rt.calls("p")

			if tc.request {
				f.g.RequestReinspect("p")
			}
			f.rt.setStatus("p", &kubetypes.PodStatus{ID: "p", IPs: []string{"10.0.0.9"}}, tc.statusErr)
			if tc.podDeleted {
				f.rt.setPods()
			}
			f.clock.Step(time.Second)
			f.relist(t)

			if got := f.rt.calls("p") - calls; got != tc.wantStatusCalls {
				t.Errorf("GetPodStatus calls %d, want %d", got, tc.wantStatusCalls)
			}
			f.g.mu.Lock()
			_, flag := f.g.reinspect["p"]
			f.g.mu.Unlock()
			if flag != tc.wantFlag {
				t.Errorf("reinspect flag %v, want %v", flag, tc.wantFlag)
			}
			expectEvents(t, f.g.Watch(), tc.wantEvents...)
			st, err := f.g.Cache().Get("p")
			switch {
			case tc.statusErr != nil:
				if !errors.Is(err, boom) {
					t.Errorf("cached error %v", err)
				}
			case tc.podDeleted:
				if st.ID != "p" || len(st.ContainerStatuses) != 0 || err != nil {
					t.Errorf("cached %+v %v, want empty", st, err)
				}
			case tc.request:
				if len(st.IPs) != 1 {
					t.Errorf("cached %+v, want the reinspected status", st)
				}
			}
			if tc.wantFlag {
				// The next relist retries and succeeds.
				f.rt.setStatus("p", nil, nil)
				f.relist(t)
				expectEvents(t, f.g.Watch(), "p/PodSync")
			}
		})
	}
}

func TestReinspectWaitsForUnlistedPod(t *testing.T) {
	f := newFixture(t, nil)
	f.g.RequestReinspect("later")
	f.relist(t)
	expectEvents(t, f.g.Watch())
	f.rt.setPods(pod("later"))
	f.relist(t)
	// The pod has no containers, so only the kept flag explains the sync.
	expectEvents(t, f.g.Watch(), "later/PodSync")
}

func TestRelistIPChange(t *testing.T) {
	for _, ips := range [][]string{{"192.168.1.5"}, {"192.168.1.5", "2000::"}} {
		f := newFixture(t, nil)
		ready := &runtimeapi.PodSandboxStatus{Id: "s", State: runtimeapi.PodSandboxState_SANDBOX_READY}
		f.rt.setPods(pod("p", ctr("c0", running)))
		f.rt.setStatus("p", &kubetypes.PodStatus{ID: "p", IPs: ips, SandboxStatuses: []*runtimeapi.PodSandboxStatus{ready}}, nil)
		f.relist(t)
		expectEvents(t, f.g.Watch(), "p/ContainerStarted/c0")
		if st, _ := f.g.Cache().Get("p"); !slices.Equal(st.IPs, ips) {
			t.Fatalf("IPs %v", st.IPs)
		}

		// The container ends and the network is torn down: no IP reported,
		// no ready sandbox. The old IPs stay.
		notReady := &runtimeapi.PodSandboxStatus{Id: "s", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
		f.rt.setPods(pod("p", ctr("c0", exited)))
		f.rt.setStatus("p", &kubetypes.PodStatus{ID: "p", SandboxStatuses: []*runtimeapi.PodSandboxStatus{notReady}}, nil)
		f.relist(t)
		expectEvents(t, f.g.Watch(), "p/ContainerDied/c0")
		if st, _ := f.g.Cache().Get("p"); !slices.Equal(st.IPs, ips) {
			t.Fatalf("IPs after teardown %v, want %v kept", st.IPs, ips)
		}

		// A ready sandbox without IPs (e.g. host network) means no IPs.
		f.rt.setPods(pod("p", ctr("c0", exited), ctr("c1", running)))
		f.rt.setStatus("p", &kubetypes.PodStatus{ID: "p", SandboxStatuses: []*runtimeapi.PodSandboxStatus{ready}}, nil)
		f.relist(t)
		expectEvents(t, f.g.Watch(), "p/ContainerStarted/c1")
		if st, _ := f.g.Cache().Get("p"); len(st.IPs) != 0 {
			t.Fatalf("IPs with a ready sandbox %v, want none", st.IPs)
		}
	}
}

func TestRelistUpdatesCacheTime(t *testing.T) {
	synctest.Test(t, testRelistUpdatesCacheTime)
}

func testRelistUpdatesCacheTime(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	start := f.clock.Now()
	f.clock.Step(time.Second)
	// A waiter for a status newer than now is released by the next relist,
	// even though the pod did not change.
	done := make(chan *kubetypes.PodStatus)
	go func() {
		st, _ := f.g.Cache().GetNewerThan(t.Context(), "p", start)
		done <- st
	}()
	synctest.Wait()
	if f.g.Cache().waiting() != 1 {
		t.Fatal("GetNewerThan did not block")
	}
	f.clock.Step(time.Second)
	f.relist(t)
	if st := <-done; len(st.ContainerStatuses) != 1 {
		t.Fatalf("got %+v", st)
	}
}

func TestRelistPod(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)), pod("q", ctr("d1", running)))
	f.relist(t)
	_ = drain(f.g.Watch())
	listed := f.rt.lists()

	// p's container exits; only p is relisted.
	f.rt.setPods(pod("p", ctr("c1", exited)), pod("q", ctr("d1", exited)))
	f.clock.Step(time.Second)
	if err := f.g.RelistPod(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, f.g.Watch(), "p/ContainerDied/c1")
	if f.rt.lists() != listed {
		t.Fatal("RelistPod listed all pods")
	}
	// The next global relist does not report p again, but reports q.
	f.relist(t)
	expectEvents(t, f.g.Watch(), "q/ContainerDied/d1")

	// An unchanged pod is marked observed: a waiter is released.
	f.clock.Step(time.Second)
	before := f.clock.Now()
	f.clock.Step(time.Second)
	if err := f.g.RelistPod(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, f.g.Watch())
	if _, err := f.g.Cache().GetNewerThan(t.Context(), "p", before); err != nil {
		t.Fatal(err)
	}

	// A pod that has vanished.
	f.rt.setPods(pod("q", ctr("d1", exited)))
	if err := f.g.RelistPod(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, f.g.Watch(), "p/ContainerRemoved/c1")

	// Runtime errors change nothing.
	f.rt.setStatus("q", nil, errors.New("down"))
	if err := f.g.RelistPod(t.Context(), "q"); !errors.Is(err, ErrRelist) {
		t.Fatalf("got %v", err)
	}
}

func TestOnDemandRelistSkippedWhenStale(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	calls := f.rt.calls("p")

	// A request made before (or at) the last global relist is covered by it.
	if f.g.serve(t.Context(), relistRequest{uid: "p", at: f.clock.Now()}) {
		t.Fatal("stale request served")
	}
	if f.g.serve(t.Context(), relistRequest{uid: "p", at: f.clock.Now().Add(-time.Second)}) {
		t.Fatal("stale request served")
	}
	if f.rt.calls("p") != calls {
		t.Fatal("stale request reached the runtime")
	}
	// A newer one is served.
	f.clock.Step(time.Millisecond)
	if !f.g.serve(t.Context(), relistRequest{uid: "p", at: f.clock.Now()}) || f.rt.calls("p") != calls+1 {
		t.Fatal("fresh request not served")
	}
}

func TestRequestRelistQueueFull(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RelistQueueCapacity = 2 })
	for range 5 {
		f.g.RequestRelist("p") // never blocks
	}
	if len(f.g.requests) != 2 {
		t.Fatalf("queued %d", len(f.g.requests))
	}
}

// TestLastSeenGauge: kubelet_pleg_last_seen_seconds is the time of the last
// successful relist, set by the relist itself; Healthy (a getter) leaves it
// alone, and a failed relist does not move it.
func TestLastSeenGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *Config) { c.Registerer = reg })
	if v := testutil.ToFloat64(f.g.metrics.lastSeen); v != 0 {
		t.Fatalf("last seen %v before any relist, want 0", v)
	}
	_, _ = f.g.Healthy()
	if v := testutil.ToFloat64(f.g.metrics.lastSeen); v != 0 {
		t.Fatalf("last seen %v after Healthy with no relist, want 0", v)
	}
	f.relist(t)
	want := float64(f.clock.Now().Unix())
	if v := testutil.ToFloat64(f.g.metrics.lastSeen); v != want {
		t.Fatalf("last seen %v after a relist, want %v", v, want)
	}
	f.clock.Step(time.Hour)
	if ok, _ := f.g.Healthy(); ok {
		t.Fatal("healthy an hour after the last relist")
	}
	if v := testutil.ToFloat64(f.g.metrics.lastSeen); v != want {
		t.Fatalf("last seen %v after Healthy, want %v (unchanged)", v, want)
	}
	f.rt.mu.Lock()
	f.rt.podsErr = errors.New("runtime down")
	f.rt.mu.Unlock()
	if err := f.g.Relist(t.Context()); err == nil {
		t.Fatal("relist succeeded with the runtime down")
	}
	if v := testutil.ToFloat64(f.g.metrics.lastSeen); v != want {
		t.Fatalf("last seen %v after a failed relist, want %v", v, want)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *Config) { c.Registerer = reg; c.ChannelCapacity = 1 })
	f.relist(t)
	f.clock.Step(2 * time.Second)
	f.rt.setPods(pod("p", ctr("c1", running), ctr("c2", running)))
	f.relist(t)
	_, _ = f.g.Healthy()
	n, err := testutil.GatherAndCount(reg, "kubelet_pleg_relist_duration_seconds", "kubelet_pleg_relist_interval_seconds")
	if err != nil || n != 2 {
		t.Fatalf("metrics: %d %v", n, err)
	}
	if v := testutil.ToFloat64(f.g.metrics.discarded); v != 1 {
		t.Fatalf("discarded %v", v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kubelet_pleg_relist_interval_seconds Interval in seconds between the starts of two relists in PLEG.
# TYPE kubelet_pleg_relist_interval_seconds histogram
kubelet_pleg_relist_interval_seconds_bucket{le="0.005"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.01"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.025"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.05"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.1"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.25"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="0.5"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="1"} 0
kubelet_pleg_relist_interval_seconds_bucket{le="2.5"} 1
kubelet_pleg_relist_interval_seconds_bucket{le="5"} 1
kubelet_pleg_relist_interval_seconds_bucket{le="10"} 1
kubelet_pleg_relist_interval_seconds_bucket{le="+Inf"} 1
kubelet_pleg_relist_interval_seconds_sum 2
kubelet_pleg_relist_interval_seconds_count 1
`), "kubelet_pleg_relist_interval_seconds"); err != nil {
		t.Fatal(err)
	}
	// A second PLEG on the same registry is a config error.
	if _, err := New(Config{Runtime: f.rt, Registerer: reg}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("duplicate registration: %v", err)
	}
}

func TestNilPodsAndContainersAreIgnored(t *testing.T) {
	f := newFixture(t, nil)
	p := pod("p", nil, ctr("c1", running))
	p.Sandboxes = []*kubetypes.Container{nil}
	f.rt.setPods(nil, p)
	f.relist(t)
	expectEvents(t, f.g.Watch(), "p/ContainerStarted/c1")
}

func TestReorderedListingIsSilent(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(withSandboxes(pod("p", ctr("a", running), ctr("b", exited), ctr("c", running)), ctr("s", running)))
	f.relist(t)
	_ = drain(f.g.Watch())
	// Same containers in another order, the sandbox listed among the
	// containers' positions: no events.
	f.rt.setPods(withSandboxes(pod("p", ctr("c", running), ctr("a", running), ctr("b", exited)), ctr("s", running)))
	f.relist(t)
	expectEvents(t, f.g.Watch())
}

// A status the caller read after changing a pod is used as RelistPod would
// use its own read: events and cache, no read of the runtime.
func TestObservePodStatus(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", exited)))
	f.relist(t)
	_ = drain(f.g.Watch())
	calls := f.rt.calls("p")

	f.clock.Step(time.Second)
	readAt := f.clock.Now()
	st := &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", TimeStamp: readAt, ContainerStatuses: []*kubetypes.ContainerStatus{
		{ID: "c2", Name: "n-c2", State: running}, {ID: "c1", Name: "n-c1", State: exited},
	}}
	f.g.ObservePodStatus("p", st)
	f.clock.Step(time.Millisecond)
	if !f.g.serve(t.Context(), <-f.g.requests) {
		t.Fatal("a status read after the last relist was not used")
	}
	if f.rt.calls("p") != calls {
		t.Fatal("the PLEG read the pod again")
	}
	expectEvents(t, f.g.Watch(), "p/ContainerStarted/c2")
	got, err := f.g.Cache().GetNewerThan(t.Context(), "p", readAt.Add(-time.Nanosecond))
	if err != nil || len(got.ContainerStatuses) != 2 || got.ContainerStatuses[0].ID != "c2" || !got.TimeStamp.Equal(readAt) {
		t.Fatalf("cache %+v, %v", got, err)
	}

	// The next global relist, listing the same, sends nothing again.
	f.rt.setPods(pod("p", ctr("c2", running), ctr("c1", exited)))
	f.relist(t)
	expectEvents(t, f.g.Watch())
}

func TestObservePodStatusStale(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	_ = drain(f.g.Watch())
	status := func(at time.Time) *kubetypes.PodStatus {
		return &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", TimeStamp: at, ContainerStatuses: []*kubetypes.ContainerStatus{
			{ID: "c1", Name: "n-c1", State: exited},
		}}
	}

	// Read before the last global relist began: that relist saw more.
	f.g.ObservePodStatus("p", status(f.clock.Now().Add(-time.Millisecond)))
	if f.g.serve(t.Context(), <-f.g.requests) {
		t.Fatal("a status read before the last global relist was used")
	}

	// Read before a newer read of the pod reached the cache.
	f.clock.Step(time.Second)
	old := f.clock.Now()
	f.clock.Step(time.Second)
	f.rt.setPods(pod("p", ctr("c1", running), ctr("c3", running)))
	if err := f.g.RelistPod(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, f.g.Watch(), "p/ContainerStarted/c3")
	f.g.ObservePodStatus("p", status(old.Add(time.Millisecond)))
	if f.g.serve(t.Context(), <-f.g.requests) {
		t.Fatal("a status older than the cached record was used")
	}
	expectEvents(t, f.g.Watch())
	if got, _ := f.g.Cache().Get("p"); len(got.ContainerStatuses) != 2 {
		t.Fatalf("the stale status replaced the cached one: %+v", got)
	}

	// No read time: a plain on-demand relist that reads the pod.
	calls := f.rt.calls("p")
	f.clock.Step(time.Second)
	f.g.ObservePodStatus("p", &kubetypes.PodStatus{ID: "p"})
	f.clock.Step(time.Millisecond)
	if !f.g.serve(t.Context(), <-f.g.requests) || f.rt.calls("p") != calls+1 {
		t.Fatal("a status without TimeStamp did not become a relist of the pod")
	}
}

// An exit reported by runtime events applies to a handed-over status too.
func TestObservePodStatusAppliesPendingExits(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)))
	f.relist(t)
	_ = drain(f.g.Watch())
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 2, FinishedAt: f.clock.Now()})
	expectEvents(t, f.g.Watch(), "p/ContainerDied/c1")

	f.clock.Step(time.Second)
	f.g.ObservePodStatus("p", &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", TimeStamp: f.clock.Now(),
		ContainerStatuses: []*kubetypes.ContainerStatus{{ID: "c1", Name: "n-c1", State: running}}})
	f.clock.Step(time.Millisecond)
	if !f.g.serve(t.Context(), <-f.g.requests) {
		t.Fatal("not served")
	}
	expectEvents(t, f.g.Watch()) // no ContainerStarted for the exited one
	got, _ := f.g.Cache().Get("p")
	if c := got.ContainerStatuses[0]; c.State != exited || c.ExitCode != 2 || !c.ExitUnconfirmed {
		t.Fatalf("cached %+v, want the event's exit applied", c)
	}
}

// A held pod is left out of global relists (no read, no events, its
// reinspect flag kept) until it is released as often as it was held; the
// first relist after that sends what changed meanwhile.
func TestHoldPod(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p", ctr("c1", running)), pod("q", ctr("d1", running)))
	f.relist(t)
	_ = drain(f.g.Watch())

	f.g.HoldPod("p")
	f.g.HoldPod("p")
	f.g.RequestReinspect("p")
	f.rt.setPods(pod("p", ctr("c1", exited), ctr("c2", running)), pod("q", ctr("d1", exited)))
	calls := f.rt.calls("p")
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, f.g.Watch(), "q/ContainerDied/d1")
	if f.rt.calls("p") != calls {
		t.Fatal("a relist read a held pod")
	}

	f.g.ReleasePod("p")
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, f.g.Watch()) // still held once

	f.g.ReleasePod("p")
	f.g.ReleasePod("p") // one too many: ignored
	f.g.ReleasePod("x") // never held: ignored
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, f.g.Watch(), "p/ContainerDied/c1", "p/ContainerStarted/c2")
	if f.rt.calls("p") != calls+1 {
		t.Fatalf("pod read %d times after the release, want 1", f.rt.calls("p")-calls)
	}
	if got, _ := f.g.Cache().Get("p"); len(got.ContainerStatuses) != 2 {
		t.Fatalf("cache %+v", got)
	}
	// Nothing changed: the next relist reads nothing.
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, f.g.Watch())
	if f.rt.calls("p") != calls+1 {
		t.Fatal("the pod was read again with nothing changed")
	}

	// A reinspect flag a relist took while the pod was held is kept for
	// the first relist after the release.
	f.g.HoldPod("p")
	f.g.RequestReinspect("p")
	f.clock.Step(time.Second)
	f.relist(t)
	f.g.ReleasePod("p")
	expectEvents(t, f.g.Watch())
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, f.g.Watch(), "p/PodSync")
	if f.rt.calls("p") != calls+2 {
		t.Fatal("the reinspected pod was not read")
	}
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	if len(f.g.held) != 0 {
		t.Fatalf("held = %v after every release", f.g.held)
	}
}

// Listing is what the last global relist listed, with its start; an
// on-demand relist of one pod does not change it.
func TestListing(t *testing.T) {
	f := newFixture(t, nil)
	if pods, at := f.g.Listing(); pods != nil || !at.IsZero() {
		t.Fatalf("before any relist: %v %v", pods, at)
	}
	f.rt.setPods(pod("p", ctr("c1", running)))
	start := f.clock.Now()
	f.relist(t)
	f.clock.Step(time.Second)
	f.rt.setPods(pod("p", ctr("c1", running)), pod("q", ctr("d1", running)))
	if err := f.g.RelistPod(t.Context(), "q"); err != nil {
		t.Fatal(err)
	}
	pods, at := f.g.Listing()
	if len(pods) != 1 || pods[0].ID != "p" || !at.Equal(start) {
		t.Fatalf("listing %v at %v, want [p] at %v", pods, at, start)
	}
	f.relist(t)
	if pods, at := f.g.Listing(); len(pods) != 2 || !at.Equal(f.clock.Now()) {
		t.Fatalf("after the second relist: %v at %v", pods, at)
	}
}
