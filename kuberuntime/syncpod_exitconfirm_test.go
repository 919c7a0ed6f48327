package kuberuntime

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// eventExited returns st with the pod's one container exited as the
// runtime's events report it (pleg.ContainerExited) while the CRI may still
// list it running.
func eventExited(t *testing.T, st *kubetypes.PodStatus, at time.Time) (*kubetypes.PodStatus, string) {
	t.Helper()
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State != kubetypes.ContainerStateRunning {
		t.Fatalf("want one running container, got %+v", st.ContainerStatuses)
	}
	cp := *st
	c := *st.ContainerStatuses[0]
	c.State, c.ExitCode, c.FinishedAt, c.Reason, c.ExitUnconfirmed = kubetypes.ContainerStateExited, 0, at, "Completed", true
	cp.ContainerStatuses = []*kubetypes.ContainerStatus{&c}
	return &cp, c.ID
}

func (s *stubCRI) setState(id string, state runtimeapi.ContainerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.containers[id].State = state
}

func (s *stubCRI) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c == method {
			n++
		}
	}
	return n
}

// syncStepping runs SyncPod in a goroutine and steps the fake clock by step
// each time SyncPod waits on it; before each step, beforeStep (if set) is
// called with the number of steps taken so far.
func syncStepping(clk *testclock.FakeClock, pod func() kubetypes.SyncResult, step time.Duration, beforeStep func(int)) kubetypes.SyncResult {
	done := make(chan kubetypes.SyncResult, 1)
	go func() { done <- pod() }()
	for n := 0; ; {
		select {
		case res := <-done:
			return res
		default:
		}
		if clk.HasWaiters() {
			if beforeStep != nil {
				beforeStep(n)
			}
			n++
			clk.Step(step)
			continue
		}
		runtime.Gosched()
	}
}

// exitTest is a pod with one container the Manager started, and the status
// a PLEG would hand over after the runtime's events reported its exit while
// the CRI still lists it running. The stub's calls are reset.
type exitTest struct {
	m   *Manager
	cri *stubCRI
	clk *testclock.FakeClock
	pod *v1.Pod
	st  *kubetypes.PodStatus
	old string // the exited container's id
}

func newExitTest(t *testing.T, uid string) *exitTest {
	t.Helper()
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod(uid, "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	st, old := eventExited(t, st, clk.Now())
	cri.resetCalls()
	return &exitTest{m: m, cri: cri, clk: clk, pod: pod, st: st, old: old}
}

func (x *exitTest) sync(ctx context.Context) kubetypes.SyncResult {
	return x.m.SyncPod(ctx, x.pod, x.st, nil)
}

func TestSyncPodExitUnconfirmedConfirmedAtOnce(t *testing.T) {
	x := newExitTest(t, "ev")
	x.cri.setState(x.old, runtimeapi.ContainerState_CONTAINER_EXITED)
	x.cri.resetCalls()
	res := x.sync(context.Background())
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := x.cri.count("ContainerStatus"); got != 1 {
		t.Errorf("ContainerStatus calls = %d, want 1 (the previous instance asked once)", got)
	}
	if got := x.cri.count("StartContainer"); got != 1 {
		t.Errorf("StartContainer calls = %d, want 1", got)
	}
}

func TestSyncPodExitUnconfirmedWaitsForTheCRI(t *testing.T) {
	x := newExitTest(t, "lag")
	ctx := context.Background()
	createdEarly := false
	res := syncStepping(x.clk, func() kubetypes.SyncResult { return x.sync(ctx) }, 10*time.Millisecond, func(n int) {
		if x.cri.count("CreateContainer") > 0 {
			createdEarly = true
		}
		if n == 3 { // the CRI catches up after a few polls
			x.cri.setState(x.old, runtimeapi.ContainerState_CONTAINER_EXITED)
		}
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if createdEarly {
		t.Error("a replacement was created while the CRI still listed the previous instance running")
	}
	if got := x.cri.count("ContainerStatus"); got < 4 {
		t.Errorf("ContainerStatus calls = %d, want >= 4 (polled until the CRI caught up)", got)
	}
	if got := x.cri.count("StartContainer"); got != 1 {
		t.Errorf("StartContainer calls = %d, want 1", got)
	}
	running := 0
	for _, c := range x.cri.containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d running containers in the CRI, want 1", running)
	}
}

func TestSyncPodExitUnconfirmedGivesUpWithBackoff(t *testing.T) {
	x := newExitTest(t, "stuck")
	ctx := context.Background()
	start := x.clk.Now()
	res := syncStepping(x.clk, func() kubetypes.SyncResult { return x.sync(ctx) }, 50*time.Millisecond, nil)
	err := res.Err()
	if !errors.Is(err, ErrExitUnconfirmed) {
		t.Fatalf("err = %v, want ErrExitUnconfirmed", err)
	}
	if waited := x.clk.Now().Sub(start); waited < DefaultExitConfirmTimeout || waited > DefaultExitConfirmTimeout+time.Second {
		t.Errorf("gave up after %v, want about %v", waited, DefaultExitConfirmTimeout)
	}
	var b interface{ BackoffUntil() time.Time }
	if !errors.As(err, &b) || !b.BackoffUntil().Equal(x.clk.Now().Add(exitConfirmRetry)) {
		t.Errorf("err is not a BackoffError until now+%v: %v", exitConfirmRetry, err)
	}
	if n := x.cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times while the previous instance was running", n)
	}
	if r, _ := x.m.Reason(x.pod.UID, "c0"); r != "" {
		t.Errorf("waiting reason %q, want none (the container is shown exited, not failing)", r)
	}

	// The next try, once the CRI has caught up, starts the replacement;
	// the crash-loop back-off was not charged by the failed try.
	x.cri.setState(x.old, runtimeapi.ContainerState_CONTAINER_EXITED)
	if res := x.sync(ctx); res.Err() != nil {
		t.Fatalf("retry: %v", res.Err())
	}
	if n := x.cri.count("StartContainer"); n != 1 {
		t.Fatalf("StartContainer calls = %d, want 1", n)
	}
}

func TestSyncPodExitUnconfirmedContainerGone(t *testing.T) {
	x := newExitTest(t, "gone")
	x.cri.mu.Lock()
	delete(x.cri.containers, x.old)
	x.cri.mu.Unlock()
	if res := x.sync(context.Background()); res.Err() != nil {
		t.Fatalf("a previous instance the CRI no longer knows must not block the start: %v", res.Err())
	}
}

func TestSyncPodExitUnconfirmedStatusError(t *testing.T) {
	x := newExitTest(t, "err")
	x.cri.errs["ContainerStatus"] = errors.New("runtime unavailable")
	res := x.sync(context.Background())
	if !errors.Is(res.Err(), ErrExitUnconfirmed) {
		t.Fatalf("err = %v, want ErrExitUnconfirmed", res.Err())
	}
	if n := x.cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times though the CRI could not be asked", n)
	}
}

func TestSyncPodExitUnconfirmedContextCancelled(t *testing.T) {
	x := newExitTest(t, "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan kubetypes.SyncResult, 1)
	go func() { done <- x.sync(ctx) }()
	var res kubetypes.SyncResult
wait:
	for {
		select {
		case res = <-done:
			t.Fatalf("SyncPod returned without waiting for the CRI: %v", res.Err())
		default:
		}
		if x.clk.HasWaiters() {
			cancel()
			res = <-done
			break wait
		}
		runtime.Gosched()
	}
	if !errors.Is(res.Err(), context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.Err())
	}
	if n := x.cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times", n)
	}
}
