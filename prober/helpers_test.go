package prober

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeStatus is a StatusGetter over a map.
type fakeStatus struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatus) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return *s.DeepCopy(), ok
}

func (f *fakeStatus) setStatus(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.UID]v1.PodStatus{}
	}
	f.m[uid] = s
}

// scripted is every probe kind returning the current scripted result.
type scripted struct {
	mu    sync.Mutex
	r     Result
	out   string
	err   error
	calls int
}

func (s *scripted) next() (Result, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.r, s.out, s.err
}
func (s *scripted) setResult(r Result) { s.mu.Lock(); s.r = r; s.mu.Unlock() }
func (s *scripted) count() int         { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }
func (s *scripted) ProbeExec(context.Context, string, []string, time.Duration) (Result, string, error) {
	return s.next()
}
func (s *scripted) ProbeHTTP(context.Context, *http.Request, time.Duration) (Result, string, error) {
	return s.next()
}
func (s *scripted) ProbeTCP(context.Context, string, int, time.Duration) (Result, string, error) {
	return s.next()
}
func (s *scripted) ProbeGRPC(context.Context, string, int, string, time.Duration) (Result, string, error) {
	return s.next()
}

const (
	testUID  = types.UID("pod-uid")
	testCID  = "containerd://c1"
	testName = "app"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type env struct {
	clk    *clocktesting.FakeClock
	status *fakeStatus
	probe  *scripted
	m      *Manager
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clk: clocktesting.NewFakeClock(start), status: &fakeStatus{}, probe: &scripted{r: Success}}
	m, err := New(Config{Status: e.status, ExecProber: e.probe, HTTPProber: e.probe, TCPProber: e.probe,
		GRPCProber: e.probe, Clock: e.clk, UpdatesBuffer: 100, Jitter: func(time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

func execProbe() *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
}

func testPod(t ProbeType, p *v1.Probe) *v1.Pod {
	c := v1.Container{Name: testName}
	switch t {
	case Liveness:
		c.LivenessProbe = p
	case Readiness:
		c.ReadinessProbe = p
	case Startup:
		c.StartupProbe = p
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: testUID, Name: "p", Namespace: "ns"},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, RestartPolicy: v1.RestartPolicyAlways},
	}
}

func runningStatus(id string, started bool, since time.Time) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: testName, ContainerID: id, Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}},
	}}}
}

// workerFor makes the worker of the only probe of pod without starting it.
func (e *env) workerFor(t ProbeType, pod *v1.Pod) *worker {
	c := &pod.Spec.Containers[0]
	return newWorker(e.m, t, pod, c, probeOf(c, t))
}

func (e *env) result(t ProbeType, id string) Result {
	r, _ := e.m.Result(t, id)
	return r
}

// drain returns the updates queued so far.
func (e *env) drain() []Update {
	var out []Update
	for {
		select {
		case u := <-e.m.Updates():
			out = append(out, u)
		default:
			return out
		}
	}
}
