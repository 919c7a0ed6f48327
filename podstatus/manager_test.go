package podstatus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// stFlakySink fails while failing is set and records what it accepted.
type stFlakySink struct {
	mu      sync.Mutex
	failing bool
	got     []v1.PodStatus
}

func (s *stFlakySink) SyncPodStatus(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return errors.New("api unavailable")
	}
	s.got = append(s.got, st)
	return nil
}

func (s *stFlakySink) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// stActivity is a ContainerActivity with a settable answer.
type stActivity struct{ running bool }

func (a *stActivity) CouldHaveRunningContainers(types.UID) bool { return a.running }

func stManager(t *testing.T, sink Sink) (*Manager, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(pstNow)
	m, err := New(Config{Sink: sink, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return m, clk
}

func stPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "a"}}},
	}
}

func stRunningStatus() v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "containerd://c1", Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}},
	}
}

func TestNewStatusManagerValidates(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Sink") {
		t.Errorf("nil sink: %v", err)
	}
	if _, err := New(Config{Sink: NewMemorySink(), SyncPeriod: -time.Second}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SyncPeriod") {
		t.Errorf("negative period: %v", err)
	}
	m, err := New(Config{Sink: NewMemorySink()})
	if err != nil || m.period != DefaultSyncPeriod {
		t.Errorf("defaults: %v %v", err, m)
	}
}

// The kubelet's TestStaleUpdates: versions grow only on change, and a sync
// pushes only what the sink has not accepted.
func TestStatusManagerVersionGrowsOnlyOnChange(t *testing.T) {
	sink := NewMemorySink()
	m, clk := stManager(t, sink)
	pod := stPod()
	ctx := t.Context()

	m.SetPodStatus(pod, stRunningStatus())
	if v := m.Version(pod.UID); v != 1 {
		t.Fatalf("version %d", v)
	}
	clk.Step(time.Minute)
	m.SetPodStatus(pod, stRunningStatus()) // same content, later time
	if v := m.Version(pod.UID); v != 1 {
		t.Errorf("unchanged status bumped version to %d", v)
	}
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sink.Updates(); n != 1 {
		t.Errorf("sink updates %d, want 1", n)
	}

	st := stRunningStatus()
	st.ContainerStatuses[0].Ready = false
	st.Conditions[0].Status = v1.ConditionFalse
	m.SetPodStatus(pod, st)
	if v := m.Version(pod.UID); v != 2 {
		t.Errorf("changed status: version %d", v)
	}
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := sink.Get(pod.UID)
	if sink.Updates() != 2 || got.ContainerStatuses[0].Ready {
		t.Errorf("sink has %d updates, status %+v", sink.Updates(), got.ContainerStatuses)
	}
	// The Ready transition got the clock's time; the unchanged condition kept the old one.
	cached, _ := m.GetPodStatus(pod.UID)
	if c := pstCond(t, cached, v1.PodReady); !c.LastTransitionTime.Time.Equal(pstNow.Add(time.Minute)) {
		t.Errorf("Ready transition %v", c.LastTransitionTime)
	}
	if c := pstCond(t, cached, v1.ContainersReady); !c.LastTransitionTime.Time.Equal(pstNow) {
		t.Errorf("ContainersReady transition %v", c.LastTransitionTime)
	}
}

func TestStatusManagerKeepsStartTime(t *testing.T) {
	m, clk := stManager(t, NewMemorySink())
	pod := stPod()
	m.SetPodStatus(pod, stRunningStatus())
	clk.Step(time.Hour)
	st := stRunningStatus()
	later := metav1.NewTime(pstNow.Add(time.Hour))
	st.StartTime = &later
	st.Phase = v1.PodPending
	m.SetPodStatus(pod, st)
	got, _ := m.GetPodStatus(pod.UID)
	if got.StartTime == nil || !got.StartTime.Time.Equal(pstNow) {
		t.Errorf("start time %v, want %v", got.StartTime, pstNow)
	}
}

// The kubelet's TestDoNotUpdate...: a terminal phase is never left.
func TestStatusManagerNeverLeavesTerminalPhase(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	failed := stRunningStatus()
	failed.Phase = v1.PodFailed
	failed.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	m.SetPodStatus(pod, failed)
	m.SetPodStatus(pod, stRunningStatus())
	got, _ := m.GetPodStatus(pod.UID)
	if got.Phase != v1.PodFailed || m.Version(pod.UID) != 1 {
		t.Errorf("phase %s version %d", got.Phase, m.Version(pod.UID))
	}
	// The terminal status had Ready forced to False.
	if c := pstCond(t, got, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != ReasonPodFailed {
		t.Errorf("Ready = %+v", c)
	}
	if c := pstCond(t, got, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Reason != ReasonPodFailed {
		t.Errorf("ContainersReady = %+v", c)
	}

	// Same from the API's view when nothing is cached.
	m2, _ := stManager(t, NewMemorySink())
	pod2 := stPod()
	pod2.Status.Phase = v1.PodSucceeded
	m2.SetPodStatus(pod2, stRunningStatus())
	if _, ok := m2.GetPodStatus(pod2.UID); ok {
		t.Errorf("status accepted out of the API's terminal phase")
	}
}

func TestStatusManagerRefusesTerminatedContainerRestart(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	st := stRunningStatus()
	st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	m.SetPodStatus(pod, st)
	m.SetPodStatus(pod, stRunningStatus())
	got, _ := m.GetPodStatus(pod.UID)
	if got.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("terminated container went back to %+v", got.ContainerStatuses[0].State)
	}
	// Under OnFailure a failed container may restart.
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	pod.UID = "uid-2"
	st.ContainerStatuses[0].State.Terminated.ExitCode = 1
	m.SetPodStatus(pod, st)
	m.SetPodStatus(pod, stRunningStatus())
	if got, _ := m.GetPodStatus(pod.UID); got.ContainerStatuses[0].State.Running == nil {
		t.Errorf("OnFailure restart refused: %+v", got.ContainerStatuses[0].State)
	}
}

func TestStatusManagerSinkErrorKeepsStatusPending(t *testing.T) {
	sink := &stFlakySink{failing: true}
	m, _ := stManager(t, sink)
	pod := stPod()
	m.SetPodStatus(pod, stRunningStatus())
	err := m.SyncOnce(t.Context())
	if !errors.Is(err, ErrSink) || !strings.Contains(err.Error(), "default/web") || !strings.Contains(err.Error(), "api unavailable") {
		t.Fatalf("err = %v", err)
	}
	sink.mu.Lock()
	sink.failing = false
	sink.mu.Unlock()
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := sink.calls(); n != 1 {
		t.Errorf("accepted %d times, want 1", n)
	}
}

func TestStatusManagerSyncOnceStopsOnContext(t *testing.T) {
	sink := NewMemorySink()
	m, _ := stManager(t, sink)
	m.SetPodStatus(stPod(), stRunningStatus())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.SyncOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if sink.Updates() != 0 {
		t.Errorf("synced with a cancelled context")
	}
}

func TestStatusManagerSetContainerReadiness(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	st := stRunningStatus()
	st.ContainerStatuses[0].Ready = false
	st.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, {Type: v1.ContainersReady, Status: v1.ConditionFalse}}
	m.SetPodStatus(pod, st)

	m.SetContainerReadiness(pod.UID, "containerd://unknown", true)
	m.SetContainerReadiness("no-such-pod", "containerd://c1", true)
	if m.Version(pod.UID) != 1 {
		t.Fatalf("unknown container/pod changed the status")
	}
	m.SetContainerReadiness(pod.UID, "containerd://c1", true)
	got, _ := m.GetPodStatus(pod.UID)
	if !got.ContainerStatuses[0].Ready || pstCond(t, got, v1.PodReady).Status != v1.ConditionTrue || pstCond(t, got, v1.ContainersReady).Status != v1.ConditionTrue {
		t.Errorf("after readiness: %+v", got)
	}
	if m.Version(pod.UID) != 2 {
		t.Errorf("version %d", m.Version(pod.UID))
	}
	m.SetContainerReadiness(pod.UID, "containerd://c1", true)
	if m.Version(pod.UID) != 2 {
		t.Errorf("same readiness bumped the version")
	}
}

func TestStatusManagerSetContainerStartupInitializesSidecarPod(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	pod.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}}
	f := false
	st := v1.PodStatus{Phase: v1.PodPending,
		InitContainerStatuses: []v1.ContainerStatus{{Name: "side", ContainerID: "containerd://s1", Started: &f, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
		ContainerStatuses:     []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonPodInitializing}}}},
		Conditions:            []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionFalse}},
	}
	m.SetPodStatus(pod, st)
	m.SetContainerStartup(pod.UID, "containerd://s1", true)
	got, _ := m.GetPodStatus(pod.UID)
	if s := got.InitContainerStatuses[0].Started; s == nil || !*s {
		t.Errorf("started = %v", s)
	}
	if c := pstCond(t, got, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
}

// The kubelet's TestTerminatePod_DefaultUnknownStatus, in our words.
func TestStatusManagerTerminatePodDefaultsUnknown(t *testing.T) {
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}
	exited := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	isUnknown := func(s v1.ContainerState) bool {
		return s.Terminated != nil && s.Terminated.ExitCode == 137 && s.Terminated.Reason == ReasonContainerStatusUnknown && s.Terminated.Message != ""
	}
	type want int
	const (
		wUnknown want = iota
		wWaiting
		wExit0
		wExit1
		wExit2
	)
	check := func(s v1.ContainerState, w want) bool {
		switch w {
		case wUnknown:
			return isUnknown(s)
		case wWaiting:
			return s.Waiting != nil && s.Terminated == nil
		case wExit0:
			return s.Terminated != nil && s.Terminated.ExitCode == 0
		case wExit1:
			return s.Terminated != nil && s.Terminated.ExitCode == 1
		default:
			return s.Terminated != nil && s.Terminated.ExitCode == 2
		}
	}
	cs := func(name string, st v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: st}
	}
	withLast := func(c v1.ContainerStatus, code int32) v1.ContainerStatus {
		c.LastTerminationState = exited(code)
		return c
	}
	cases := []struct {
		name      string
		inits     []v1.ContainerStatus
		regular   []v1.ContainerStatus
		phase     v1.PodPhase
		wantInit  []want
		wantReg   []want
		wantPhase v1.PodPhase
	}{
		{name: "failed stays failed", regular: []v1.ContainerStatus{cs("0", exited(2))}, phase: v1.PodFailed, wantReg: []want{wExit2}, wantPhase: v1.PodFailed},
		{name: "running becomes failed", regular: []v1.ContainerStatus{cs("0", v1.ContainerState{Running: &v1.ContainerStateRunning{}})}, phase: v1.PodRunning, wantReg: []want{wUnknown}, wantPhase: v1.PodFailed},
		{name: "last termination kept", regular: []v1.ContainerStatus{withLast(cs("0", waiting), 2)}, phase: v1.PodRunning, wantReg: []want{wUnknown}, wantPhase: v1.PodFailed},
		{name: "no previous state", regular: []v1.ContainerStatus{cs("0", waiting)}, phase: v1.PodRunning, wantReg: []want{wUnknown}, wantPhase: v1.PodFailed},
		{name: "uninitialized: first init only", inits: []v1.ContainerStatus{cs("init-0", waiting), cs("init-1", waiting)}, regular: []v1.ContainerStatus{cs("0", waiting)},
			phase: v1.PodPending, wantInit: []want{wUnknown, wWaiting}, wantReg: []want{wWaiting}, wantPhase: v1.PodFailed},
		{name: "uninitialized: gaps", inits: []v1.ContainerStatus{cs("init-0", waiting), cs("init-1", waiting), cs("init-2", exited(1)), cs("init-3", waiting)},
			regular: []v1.ContainerStatus{cs("0", waiting)}, phase: v1.PodPending,
			wantInit: []want{wUnknown, wUnknown, wExit1, wWaiting}, wantReg: []want{wWaiting}, wantPhase: v1.PodFailed},
		{name: "successful last init initializes", inits: []v1.ContainerStatus{cs("init-0", waiting), cs("init-1", waiting), cs("init-2", exited(0))},
			regular: []v1.ContainerStatus{cs("0", waiting)}, phase: v1.PodRunning,
			wantInit: []want{wUnknown, wUnknown, wExit0}, wantReg: []want{wUnknown}, wantPhase: v1.PodFailed},
		{name: "previously successful last init", inits: []v1.ContainerStatus{cs("init-0", waiting), withLast(cs("init-1", waiting), 0)},
			regular: []v1.ContainerStatus{cs("0", waiting)}, phase: v1.PodRunning,
			wantInit: []want{wUnknown, wUnknown}, wantReg: []want{wUnknown}, wantPhase: v1.PodFailed},
		{name: "terminated regular proves initialization", inits: []v1.ContainerStatus{cs("init-0", waiting)}, regular: []v1.ContainerStatus{cs("0", exited(0))},
			phase: v1.PodRunning, wantInit: []want{wUnknown}, wantReg: []want{wExit0}, wantPhase: v1.PodFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := stManager(t, NewMemorySink())
			pod := stPod()
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
			pod.Spec.Containers = nil
			for _, c := range tc.inits {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: c.Name})
			}
			for _, c := range tc.regular {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name})
			}
			pod.Status = v1.PodStatus{Phase: tc.phase, InitContainerStatuses: tc.inits, ContainerStatuses: tc.regular}
			m.SetPodStatus(pod, pod.Status)
			m.TerminatePod(pod)
			got, ok := m.GetPodStatus(pod.UID)
			if !ok {
				t.Fatal("no status")
			}
			if got.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", got.Phase, tc.wantPhase)
			}
			for i, w := range tc.wantInit {
				if !check(got.InitContainerStatuses[i].State, w) {
					t.Errorf("init %d state %+v, want %d", i, got.InitContainerStatuses[i].State, w)
				}
			}
			for i, w := range tc.wantReg {
				if !check(got.ContainerStatuses[i].State, w) {
					t.Errorf("container %d state %+v, want %d", i, got.ContainerStatuses[i].State, w)
				}
			}
		})
	}
}

func TestStatusManagerTerminateStaticPodKeepsPhase(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	pod.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: "file"}
	m.SetPodStatus(pod, stRunningStatus())
	m.TerminatePod(pod)
	got, _ := m.GetPodStatus(pod.UID)
	if got.Phase != v1.PodRunning {
		t.Errorf("static pod phase %s", got.Phase)
	}
	if !isTerminatedUnknown(got.ContainerStatuses[0].State) {
		t.Errorf("container %+v", got.ContainerStatuses[0].State)
	}
}

func isTerminatedUnknown(s v1.ContainerState) bool {
	return s.Terminated != nil && s.Terminated.ExitCode == 137 && s.Terminated.Reason == ReasonContainerStatusUnknown
}

// The kubelet's TestMergePodStatus: a terminal phase waits until the
// containers are stopped; others' conditions are kept.
func TestStatusManagerHoldsTerminalPhaseWhileContainersRun(t *testing.T) {
	sink := NewMemorySink()
	act := &stActivity{running: true}
	m, err := New(Config{Sink: sink, Clock: clocktesting.NewFakeClock(pstNow), ContainerActivity: act})
	if err != nil {
		t.Fatal(err)
	}
	pod := stPod()
	pod.Status.Conditions = []v1.PodCondition{{Type: "example.com/custom", Status: v1.ConditionTrue}}
	m.SetPodStatus(pod, stRunningStatus())
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed := stRunningStatus()
	failed.Phase = v1.PodFailed
	failed.Reason = "Evicted"
	failed.Conditions = append(failed.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue})
	m.SetPodStatus(pod, failed)
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := sink.Get(pod.UID)
	if got.Phase != v1.PodRunning || got.Reason != "" {
		t.Errorf("terminal phase sent while containers may run: %s %q", got.Phase, got.Reason)
	}
	if _, c := FindCondition(got.Conditions, v1.DisruptionTarget); c != nil {
		t.Errorf("DisruptionTarget sent early")
	}
	if _, c := FindCondition(got.Conditions, "example.com/custom"); c == nil {
		t.Errorf("foreign condition dropped: %+v", got.Conditions)
	}
	n := sink.Updates()
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sink.Updates() != n {
		t.Errorf("held-back status resent without change")
	}

	act.running = false
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ = sink.Get(pod.UID)
	if got.Phase != v1.PodFailed || got.Reason != "Evicted" {
		t.Errorf("terminal phase not sent once stopped: %s %q", got.Phase, got.Reason)
	}
	if c := pstCond(t, got, v1.PodReady); c.Status != v1.ConditionFalse {
		t.Errorf("terminal pod sent Ready %+v", c)
	}
	if _, c := FindCondition(got.Conditions, v1.DisruptionTarget); c == nil {
		t.Errorf("DisruptionTarget missing once terminal")
	}
}

func TestStatusManagerDeletesFinishedPod(t *testing.T) {
	sink := NewMemorySink()
	m, _ := stManager(t, sink)
	pod := stPod()
	pod.DeletionTimestamp = &metav1.Time{Time: pstNow}
	m.SetPodStatus(pod, stRunningStatus())
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sink.Deleted(pod.UID) {
		t.Fatal("deleted before termination finished")
	}
	m.TerminatePod(pod)
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !sink.Deleted(pod.UID) {
		t.Error("finished terminal pod not deleted")
	}
	if _, ok := m.GetPodStatus(pod.UID); ok {
		t.Error("status of the deleted pod kept")
	}

	// A mirror pod is never deleted.
	mirror := stPod()
	mirror.UID = "uid-mirror"
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotation: "x"}
	mirror.DeletionTimestamp = &metav1.Time{Time: pstNow}
	m.SetPodStatus(mirror, stRunningStatus())
	m.TerminatePod(mirror)
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sink.Deleted(mirror.UID) {
		t.Error("mirror pod deleted")
	}
}

func TestStatusManagerRemoveOrphanedStatuses(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	a, b := stPod(), stPod()
	b.UID = "uid-2"
	m.SetPodStatus(a, stRunningStatus())
	m.SetPodStatus(b, stRunningStatus())
	m.RemoveOrphanedStatuses(map[types.UID]bool{a.UID: true})
	if _, ok := m.GetPodStatus(a.UID); !ok {
		t.Error("kept pod forgotten")
	}
	if _, ok := m.GetPodStatus(b.UID); ok {
		t.Error("orphan kept")
	}
}

func TestStatusManagerNilInput(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	m.SetPodStatus(nil, v1.PodStatus{})
	m.TerminatePod(nil)
	m.SetContainerReadiness("x", "", true)
	m.SetContainerStartup("x", "", true)
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestStatusManagerRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		sink := &stFlakySink{}
		clk := clocktesting.NewFakeClock(pstNow)
		m, err := New(Config{Sink: sink, Clock: clk, SyncPeriod: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pod := stPod()
		m.SetPodStatus(pod, stRunningStatus()) // before Run: synced at start
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if n := sink.calls(); n != 1 {
			t.Fatalf("start sync: %d calls", n)
		}
		if err := m.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v", err)
		}

		// A change is synced at once.
		st := stRunningStatus()
		st.ContainerStatuses[0].RestartCount = 1
		m.SetPodStatus(pod, st)
		synctest.Wait()
		if n := sink.calls(); n != 2 {
			t.Fatalf("after change: %d calls", n)
		}

		// A refused status is retried on the period.
		sink.mu.Lock()
		sink.failing = true
		sink.mu.Unlock()
		st.ContainerStatuses[0].RestartCount = 2
		m.SetPodStatus(pod, st)
		synctest.Wait()
		sink.mu.Lock()
		sink.failing = false
		sink.mu.Unlock()
		if n := sink.calls(); n != 2 {
			t.Fatalf("refused update counted: %d", n)
		}
		clk.Step(10 * time.Second)
		synctest.Wait()
		if n := sink.calls(); n != 3 {
			t.Fatalf("after the period: %d calls", n)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestMemorySink(t *testing.T) {
	s := NewMemorySink()
	pod := stPod()
	if err := s.SyncPodStatus(t.Context(), nil, v1.PodStatus{}); !errors.Is(err, ErrNoPod) {
		t.Errorf("nil pod: %v", err)
	}
	st := stRunningStatus()
	if err := s.SyncPodStatus(t.Context(), pod, st); err != nil {
		t.Fatal(err)
	}
	st.Phase = v1.PodFailed // the sink holds its own copy
	got, ok := s.Get(pod.UID)
	if !ok || got.Phase != v1.PodRunning || s.Updates() != 1 || s.Len() != 1 {
		t.Errorf("got %v %v updates %d", ok, got.Phase, s.Updates())
	}
	select {
	case <-s.Changed():
	default:
		t.Error("no change signal")
	}
	if err := s.DeletePod(t.Context(), pod); err != nil || !s.Deleted(pod.UID) || s.Len() != 0 {
		t.Errorf("delete: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.SyncPodStatus(ctx, pod, st); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// equalByAgent is semantic equality on what the agent owns: the fast
// reflect test must not turn semantically equal statuses unequal.
func TestStatusEqualByAgent(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	base := func() *v1.PodStatus {
		start := metav1.NewTime(at)
		return &v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &start,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: start}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}},
				AllocatedResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}},
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*v1.PodStatus)
		equal bool
	}{
		{"identical", func(*v1.PodStatus) {}, true},
		{"a time in another location", func(s *v1.PodStatus) {
			t := metav1.NewTime(at.In(time.FixedZone("x", 3600)))
			s.StartTime = &t
		}, true},
		{"a quantity spelled otherwise", func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU] = resource.MustParse("1000m")
		}, true},
		{"empty against nil", func(s *v1.PodStatus) { s.InitContainerStatuses = []v1.ContainerStatus{} }, true},
		{"a condition's time only", func(s *v1.PodStatus) { s.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(time.Hour)) }, true},
		{"another's condition", func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionFalse})
		}, true},
		{"a container state", func(s *v1.PodStatus) {
			s.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
		}, false},
		{"a condition's status", func(s *v1.PodStatus) { s.Conditions[0].Status = v1.ConditionFalse }, false},
		{"a quantity", func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU] = resource.MustParse("2")
		}, false},
	} {
		a, b := base(), base()
		tc.edit(b)
		if got := equalByAgent(a, b); got != tc.equal {
			t.Errorf("%s: equal %v, want %v", tc.name, got, tc.equal)
		}
	}
}

// TestNewStatusManagerReportsEveryProblem: every bad field is named at once.
func TestNewStatusManagerReportsEveryProblem(t *testing.T) {
	_, err := New(Config{SyncPeriod: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Sink", "SyncPeriod"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}

// Changed is closed by every new version and by a removal, and not by an
// update that changes nothing.
func TestStatusManagerChanged(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	pod := stPod()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := m.Changed()
	if closed(ch) {
		t.Fatal("Changed closed before any status")
	}
	m.SetPodStatus(pod, stRunningStatus())
	if !closed(ch) {
		t.Fatal("Changed not closed by a new status")
	}
	ch = m.Changed()
	m.SetPodStatus(pod, stRunningStatus())
	if closed(ch) {
		t.Fatal("Changed closed by an update that changed nothing")
	}
	m.RemoveOrphanedStatuses(map[types.UID]bool{pod.UID: true})
	if closed(ch) {
		t.Fatal("Changed closed though nothing was removed")
	}
	m.RemoveOrphanedStatuses(nil)
	if !closed(ch) {
		t.Fatal("Changed not closed by a removal")
	}
}

// A pod whose status the manager dropped (removed from the sources and
// stopped) is forgotten by a sink that can forget: the default
// MemorySink keeps only the pods the agent knows.
func TestStatusManagerForgetsRemovedPodsInSink(t *testing.T) {
	sink := NewMemorySink()
	m, _ := stManager(t, sink)
	pod := stPod()
	other := stPod()
	other.UID, other.Name = "uid-2", "other"
	m.SetPodStatus(pod, stRunningStatus())
	m.SetPodStatus(other, stRunningStatus())
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sink.Len() != 2 {
		t.Fatalf("sink has %d pods, want 2", sink.Len())
	}
	m.RemoveOrphanedStatuses(map[types.UID]bool{other.UID: true})
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := sink.Get(pod.UID); ok || sink.Len() != 1 {
		t.Fatalf("removed pod still in the sink (%d pods)", sink.Len())
	}
	if _, ok := sink.Get(other.UID); !ok {
		t.Fatal("the pod still known was forgotten")
	}
	// The same through a full resync.
	m.RemoveOrphanedStatuses(nil)
	if err := m.ResyncAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sink.Len() != 0 {
		t.Fatalf("sink has %d pods after every pod was removed, want 0", sink.Len())
	}
}

// A pod whose first status is terminal while its containers may still
// run (a pod rejected at admission before the pod workers know every
// pod) reaches the sink first with that terminal status: no placeholder
// is sent meanwhile, and Recheck has Run send it without waiting for
// the sync period.
func TestStatusManagerFirstReportIsNotAPlaceholder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := NewMemorySink()
		act := &stAtomicActivity{}
		act.running.Store(true)
		m, err := New(Config{Sink: sink, ContainerActivity: act, SyncPeriod: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		pod := stPod()
		m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "NodePorts", Message: "Pod was rejected: no port"})
		if err := m.SyncOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st, ok := sink.Get(pod.UID); ok {
			t.Fatalf("placeholder sent before the terminal status: phase %q reason %q", st.Phase, st.Reason)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait() // Run's first pass: still held back
		if _, ok := sink.Get(pod.UID); ok {
			t.Fatal("status sent while held back")
		}
		act.running.Store(false)
		m.Recheck()
		synctest.Wait()
		st, ok := sink.Get(pod.UID)
		if !ok || st.Phase != v1.PodFailed || st.Reason != "NodePorts" || st.Message != "Pod was rejected: no port" {
			t.Fatalf("after Recheck: %v %+v", ok, st)
		}
		if sink.Updates() != 1 {
			t.Fatalf("%d updates, want 1", sink.Updates())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// stAtomicActivity is a ContainerActivity that may change while Run runs.
type stAtomicActivity struct{ running atomic.Bool }

func (a *stAtomicActivity) CouldHaveRunningContainers(types.UID) bool { return a.running.Load() }

// RecheckPod wakes Run for a known pod (a terminal phase held back while
// its containers ran is then offered at once) and ignores unknown pods.
func TestRecheckPodSignalsKnownPodsOnly(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	m.RecheckPod("nobody")
	if len(m.notify) != 0 {
		t.Fatal("RecheckPod of an unknown pod woke the sync")
	}
	pod := stPod()
	m.SetPodStatus(pod, stRunningStatus())
	<-m.notify // the change's own signal
	m.mu.Lock()
	clear(m.pending)
	m.mu.Unlock()
	m.RecheckPod(pod.UID)
	if len(m.notify) != 1 {
		t.Fatal("RecheckPod did not wake the sync")
	}
	m.mu.Lock()
	_, pending := m.pending[pod.UID]
	m.mu.Unlock()
	if !pending {
		t.Error("RecheckPod did not make the pod pending")
	}
}
