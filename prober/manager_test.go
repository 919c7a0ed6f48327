package prober

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no Status: %v", err)
	}
	if _, err := New(Config{Status: &fakeStatus{}, UpdatesBuffer: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative buffer: %v", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Status: &fakeStatus{}, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Status: &fakeStatus{}, Registerer: reg}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("duplicate registration: %v", err)
	}
}

// runningPod has containers: no probes, readiness, liveness, startup, and
// a sidecar with readiness.
func probedPod() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: testUID, Name: "p", Namespace: "ns"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init"}, {Name: "side", RestartPolicy: &always, ReadinessProbe: execProbe()}},
			Containers: []v1.Container{
				{Name: "none"},
				{Name: "ready", ReadinessProbe: execProbe()},
				{Name: "live", LivenessProbe: execProbe()},
				{Name: "start", StartupProbe: execProbe()},
			},
		},
	}
}

func TestAddRemoveCleanup(t *testing.T) {
	e := newEnv(t)
	pod := probedPod()
	e.m.AddPod(pod)
	e.m.AddPod(pod) // idempotent
	if n := e.m.Workers(); n != 4 {
		t.Fatalf("%d workers, want 4 (ready, live, start, side)", n)
	}
	e.m.StopLivenessAndStartup(pod)
	if n := e.m.Workers(); n != 2 {
		t.Fatalf("%d workers after StopLivenessAndStartup, want 2", n)
	}
	e.m.CleanupPods(map[types.UID]struct{}{testUID: {}})
	if n := e.m.Workers(); n != 2 {
		t.Fatalf("CleanupPods removed a desired pod's workers")
	}
	e.m.CleanupPods(nil)
	if n := e.m.Workers(); n != 0 {
		t.Fatalf("%d workers after CleanupPods(nil)", n)
	}
	e.m.AddPod(pod)
	e.m.RemovePod(pod)
	if n := e.m.Workers(); n != 0 {
		t.Fatalf("%d workers after RemovePod", n)
	}
	e.m.AddPod(nil)
	e.m.RemovePod(nil)
	e.m.StopLivenessAndStartup(nil)
}

func TestUpdatePodStatus(t *testing.T) {
	e := newEnv(t)
	pod := probedPod()
	e.m.AddPod(pod)
	run := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	term0 := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	st := v1.PodStatus{
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "init", ContainerID: "c://init", State: term0},
			{Name: "side", ContainerID: "c://side", State: run},
		},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "none", ContainerID: "c://none", State: run},
			{Name: "ready", ContainerID: "c://ready", State: run},
			{Name: "live", ContainerID: "c://live", State: run},
			{Name: "start", ContainerID: "c://start", State: run},
		},
	}
	check := func(stage string, want map[string][2]bool) {
		t.Helper()
		s := *st.DeepCopy()
		e.m.UpdatePodStatus(pod, &s)
		for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
			w := want[cs.Name]
			if cs.Started == nil || *cs.Started != w[0] || cs.Ready != w[1] {
				t.Errorf("%s: %s started %v ready %v, want %v", stage, cs.Name, *cs.Started, cs.Ready, w)
			}
		}
	}
	// No results yet: readiness not ready, startup not started.
	check("no results", map[string][2]bool{
		"init": {false, true}, "side": {true, false}, "none": {true, true},
		"ready": {true, false}, "live": {true, true}, "start": {false, false},
	})
	e.m.results.set("c://ready", Readiness, Success)
	e.m.results.set("c://side", Readiness, Success)
	e.m.results.set("c://start", Startup, Success)
	check("results", map[string][2]bool{
		"init": {false, true}, "side": {true, true}, "none": {true, true},
		"ready": {true, true}, "live": {true, true}, "start": {true, true},
	})
	e.m.results.set("c://start", Startup, Failure)
	e.m.results.set("c://ready", Readiness, Failure)
	check("failures", map[string][2]bool{
		"init": {false, true}, "side": {true, true}, "none": {true, true},
		"ready": {true, false}, "live": {true, true}, "start": {false, false},
	})
	// The status view the sync loop reads.
	sr := e.m.StatusResults()
	if started, ok := sr.Startup("c://start"); started || !ok {
		t.Errorf("StatusResults.Startup: %v %v", started, ok)
	}
	if ready, ok := sr.Readiness("c://side"); !ready || !ok {
		t.Errorf("StatusResults.Readiness: %v %v", ready, ok)
	}
	if _, ok := sr.Readiness("c://none"); ok {
		t.Error("a container without a probe has a readiness result")
	}
	// The runtime view, by raw CRI id.
	rr := e.m.RuntimeResults()
	if rr.Startup("start") != Failure || rr.Liveness("live") != Unknown {
		t.Errorf("RuntimeResults: %v %v", rr.Startup("start"), rr.Liveness("live"))
	}
}

// syncEnv runs a Manager in a synctest bubble on the (bubbled) real clock.
type syncEnv struct {
	status *fakeStatus
	probe  *scripted
	m      *Manager
	mu     sync.Mutex
	got    []Update
}

func newSyncEnv(t *testing.T, jitter func(time.Duration) time.Duration) (*syncEnv, context.CancelFunc, chan error) {
	e := &syncEnv{status: &fakeStatus{}, probe: &scripted{r: Success}}
	m, err := New(Config{Status: e.status, ExecProber: e.probe, Clock: clock.RealClock{}, Jitter: jitter})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-m.Updates():
				e.mu.Lock()
				e.got = append(e.got, u)
				e.mu.Unlock()
			}
		}
	}()
	return e, cancel, done
}

func (e *syncEnv) updates() []Update {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

func TestUpdateReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, cancel, done := newSyncEnv(t, func(time.Duration) time.Duration { return 0 })
		pod := testPod(Readiness, execProbe())
		e.status.setStatus(testUID, runningStatus(testCID, true, time.Now()))
		e.m.AddPod(pod)
		synctest.Wait()
		// Initial Failure, then the first probe's Success: two updates.
		want := []Update{{testUID, testCID, Readiness, Failure}, {testUID, testCID, Readiness, Success}}
		if got := e.updates(); !equalUpdates(got, want) {
			t.Fatalf("updates %+v, want %+v", got, want)
		}
		// Successes do not repeat updates.
		advance(30 * time.Second)
		synctest.Wait()
		if got := e.updates(); len(got) != 0 {
			t.Fatalf("unchanged results sent %+v", got)
		}
		if c := e.probe.count(); c != 4 {
			t.Errorf("%d probes in 30s at period 10s, want 4", c)
		}
		e.probe.setResult(Failure)
		advance(30 * time.Second) // 3 failures = threshold
		synctest.Wait()
		if got := e.updates(); !equalUpdates(got, []Update{{testUID, testCID, Readiness, Failure}}) {
			t.Fatalf("after 3 failures: %+v", got)
		}
		e.m.RemovePod(pod)
		synctest.Wait()
		if e.m.Workers() != 0 {
			t.Error("worker did not exit on RemovePod")
		}
		if _, ok := e.m.Result(Readiness, testCID); ok {
			t.Error("the result outlived its worker")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := e.m.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v", err)
		}
	})
}

func TestFirstProbeJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked time.Duration
		e, cancel, done := newSyncEnv(t, func(p time.Duration) time.Duration { asked = p; return 7 * time.Second })
		p := execProbe()
		p.PeriodSeconds = 20
		e.status.setStatus(testUID, runningStatus(testCID, true, time.Now()))
		e.m.AddPod(testPod(Liveness, p))
		synctest.Wait()
		if asked != 20*time.Second || e.probe.count() != 0 {
			t.Fatalf("jitter asked for %v; %d probes before the delay", asked, e.probe.count())
		}
		advance(7 * time.Second)
		synctest.Wait()
		if e.probe.count() != 1 {
			t.Fatalf("%d probes after the delay", e.probe.count())
		}
		cancel()
		<-done
	})
}

func TestAddBeforeRunAndAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStatus{}
		probe := &scripted{r: Success}
		m, err := New(Config{Status: st, ExecProber: probe, Jitter: func(time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		st.setStatus(testUID, runningStatus(testCID, true, time.Now()))
		m.AddPod(testPod(Liveness, execProbe()))
		synctest.Wait()
		if probe.count() != 0 {
			t.Fatal("probed before Run")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if probe.count() != 1 {
			t.Fatalf("%d probes once running", probe.count())
		}
		<-m.Updates()
		cancel()
		<-done
		m.AddPod(testPod(Readiness, execProbe()))
		synctest.Wait()
		if probe.count() != 1 {
			t.Error("a pod added after Run probed")
		}
	})
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t)
	m, err := New(Config{Status: e.status, ExecProber: e.probe, Registerer: reg, Clock: e.clk, UpdatesBuffer: 10})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(Liveness, execProbe())
	w := newWorker(m, Liveness, pod, &pod.Spec.Containers[0], pod.Spec.Containers[0].LivenessProbe)
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	w.doProbe(t.Context())
	if n := testutil.ToFloat64(m.probes.WithLabelValues("Liveness", "successful")); n != 1 {
		t.Errorf("counter %v", n)
	}
}

func equalUpdates(a, b []Update) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// advance lets d pass on the synctest bubble's clock.
func advance(d time.Duration) { <-time.After(d) }
