package runtime

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// eventExited returns st with the pod's one container exited as the
// runtime's events report it (pleg.ContainerExited) while the CRI may still
// list it running.
func eventExited(t *testing.T, st *PodStatus, at time.Time) (*PodStatus, string) {
	t.Helper()
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State != ContainerStateRunning {
		t.Fatalf("want one running container, got %+v", st.ContainerStatuses)
	}
	cp := *st
	c := *st.ContainerStatuses[0]
	c.State, c.ExitCode, c.FinishedAt, c.Reason, c.ExitUnconfirmed = ContainerStateExited, 0, at, "Completed", true
	cp.ContainerStatuses = []*ContainerStatus{&c}
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
func syncStepping(clk *testclock.FakeClock, pod func() SyncResult, step time.Duration, beforeStep func(int)) SyncResult {
	done := make(chan SyncResult, 1)
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
		goruntime.Gosched()
	}
}

func TestSyncPodExitUnconfirmedConfirmedAtOnce(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("ev", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, old := eventExited(t, st, clk.Now())
	cri.setState(old, runtimeapi.ContainerState_CONTAINER_EXITED)
	cri.resetCalls()
	res := m.SyncPod(context.Background(), pod, st, nil)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got := cri.count("ContainerStatus"); got != 1 {
		t.Errorf("ContainerStatus calls = %d, want 1 (the previous instance asked once)", got)
	}
	if got := cri.count("StartContainer"); got != 1 {
		t.Errorf("StartContainer calls = %d, want 1", got)
	}
}

func TestSyncPodExitUnconfirmedWaitsForTheCRI(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("lag", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, old := eventExited(t, st, clk.Now())
	cri.resetCalls()
	ctx := context.Background()
	createdEarly := false
	res := syncStepping(clk, func() SyncResult { return m.SyncPod(ctx, pod, st, nil) }, 10*time.Millisecond, func(n int) {
		if cri.count("CreateContainer") > 0 {
			createdEarly = true
		}
		if n == 3 { // the CRI catches up after a few polls
			cri.setState(old, runtimeapi.ContainerState_CONTAINER_EXITED)
		}
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if createdEarly {
		t.Error("a replacement was created while the CRI still listed the previous instance running")
	}
	if got := cri.count("ContainerStatus"); got < 4 {
		t.Errorf("ContainerStatus calls = %d, want >= 4 (polled until the CRI caught up)", got)
	}
	if got := cri.count("StartContainer"); got != 1 {
		t.Errorf("StartContainer calls = %d, want 1", got)
	}
	running := 0
	for _, c := range cri.containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d running containers in the CRI, want 1", running)
	}
}

func TestSyncPodExitUnconfirmedGivesUpWithBackoff(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("stuck", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, old := eventExited(t, st, clk.Now())
	cri.resetCalls()
	ctx := context.Background()
	start := clk.Now()
	res := syncStepping(clk, func() SyncResult { return m.SyncPod(ctx, pod, st, nil) }, 50*time.Millisecond, nil)
	err := res.Err()
	if !errors.Is(err, ErrExitUnconfirmed) {
		t.Fatalf("err = %v, want ErrExitUnconfirmed", err)
	}
	if waited := clk.Now().Sub(start); waited < DefaultExitConfirmTimeout || waited > DefaultExitConfirmTimeout+time.Second {
		t.Errorf("gave up after %v, want about %v", waited, DefaultExitConfirmTimeout)
	}
	var b interface{ BackoffUntil() time.Time }
	if !errors.As(err, &b) || !b.BackoffUntil().Equal(clk.Now().Add(exitConfirmRetry)) {
		t.Errorf("err is not a BackoffError until now+%v: %v", exitConfirmRetry, err)
	}
	if n := cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times while the previous instance was running", n)
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != "" {
		t.Errorf("waiting reason %q, want none (the container is shown exited, not failing)", r)
	}

	// The next try, once the CRI has caught up, starts the replacement;
	// the crash-loop back-off was not charged by the failed try.
	cri.setState(old, runtimeapi.ContainerState_CONTAINER_EXITED)
	if res := m.SyncPod(ctx, pod, st, nil); res.Err() != nil {
		t.Fatalf("retry: %v", res.Err())
	}
	if n := cri.count("StartContainer"); n != 1 {
		t.Fatalf("StartContainer calls = %d, want 1", n)
	}
}

func TestSyncPodExitUnconfirmedContainerGone(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("gone", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, old := eventExited(t, st, clk.Now())
	cri.mu.Lock()
	delete(cri.containers, old)
	cri.mu.Unlock()
	if res := m.SyncPod(context.Background(), pod, st, nil); res.Err() != nil {
		t.Fatalf("a previous instance the CRI no longer knows must not block the start: %v", res.Err())
	}
}

func TestSyncPodExitUnconfirmedStatusError(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("err", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, _ = eventExited(t, st, clk.Now())
	cri.resetCalls()
	cri.errs["ContainerStatus"] = errors.New("runtime unavailable")
	res := m.SyncPod(context.Background(), pod, st, nil)
	if !errors.Is(res.Err(), ErrExitUnconfirmed) {
		t.Fatalf("err = %v, want ErrExitUnconfirmed", res.Err())
	}
	if n := cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times though the CRI could not be asked", n)
	}
}

func TestSyncPodExitUnconfirmedContextCancelled(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("cancel", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	st, _ = eventExited(t, st, clk.Now())
	cri.resetCalls()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan SyncResult, 1)
	go func() { done <- m.SyncPod(ctx, pod, st, nil) }()
	var res SyncResult
wait:
	for {
		select {
		case res = <-done:
			t.Fatalf("SyncPod returned without waiting for the CRI: %v", res.Err())
		default:
		}
		if clk.HasWaiters() {
			cancel()
			res = <-done
			break wait
		}
		goruntime.Gosched()
	}
	if !errors.Is(res.Err(), context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.Err())
	}
	if n := cri.count("CreateContainer"); n != 0 {
		t.Fatalf("CreateContainer called %d times", n)
	}
}
