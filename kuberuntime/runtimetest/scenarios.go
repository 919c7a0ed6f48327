package runtimetest

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// RunScenarios drives pods through a kuberuntime.Manager on the endpoint.
func RunScenarios(t *testing.T, newEndpoint Factory) {
	t.Run("InitThenApps", func(t *testing.T) { testInitThenApps(t, newEndpoint(t)) })
	t.Run("OnFailureBackOff", func(t *testing.T) { testOnFailureBackOff(t, newEndpoint(t)) })
	t.Run("NeverNotRestarted", func(t *testing.T) { testNeverNotRestarted(t, newEndpoint(t)) })
	t.Run("KillPodGrace", func(t *testing.T) { testKillPodGrace(t, newEndpoint(t)) })
	t.Run("ImageNeverPull", func(t *testing.T) { testImageNeverPull(t, newEndpoint(t)) })
}

func (e *Endpoint) manager(t *testing.T) *kuberuntime.Manager {
	t.Helper()
	m, err := kuberuntime.New(kuberuntime.Config{
		Runtime:     e.Runtime,
		Images:      e.Images,
		Clock:       e.Clock,
		PodLogsRoot: e.LogRoot,
		Logger:      zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatalf("kuberuntime.New: %v", err)
	}
	return m
}

// syncUntil runs the kubelet's loop for one pod (status, SyncPod, wait a tick)
// until cond holds on the pod's status.
func (e *Endpoint) syncUntil(t *testing.T, m *kuberuntime.Manager, pod *v1.Pod, limit time.Duration, what string,
	each func(*kubetypes.PodStatus, kubetypes.SyncResult), cond func(*kubetypes.PodStatus) bool) *kubetypes.PodStatus {
	t.Helper()
	ctx := t.Context()
	var st *kubetypes.PodStatus
	e.eventually(t, limit, what, func() (bool, string) {
		var err error
		st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return false, "GetPodStatus: " + err.Error()
		}
		if cond(st) {
			return true, ""
		}
		res := m.SyncPod(ctx, pod, st, nil)
		if each != nil {
			each(st, res)
		}
		s := describe(st)
		if err := res.Err(); err != nil {
			s += "; last sync: " + err.Error()
		}
		return false, s
	})
	return st
}

// cleanupPod kills whatever of the pod still runs when the test ends.
func (e *Endpoint) cleanupPod(t *testing.T, m *kuberuntime.Manager, pod *v1.Pod) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		running := e.runningPod(t, ctx, m, pod)
		if running == nil {
			return
		}
		e.drive(t, time.Minute, func() { _ = m.KillPod(ctx, pod, running, ptr.To[int64](0)) })
	})
}

func (e *Endpoint) runningPod(t *testing.T, ctx context.Context, m *kuberuntime.Manager, pod *v1.Pod) *kubetypes.Pod {
	pods, err := m.GetPods(ctx, true)
	if err != nil {
		t.Errorf("GetPods: %v", err)
		return nil
	}
	for _, p := range pods {
		if p.ID == pod.UID {
			return p
		}
	}
	return nil
}

func state(st *kubetypes.PodStatus, name string) kubetypes.ContainerState {
	if cs := st.FindContainerStatusByName(name); cs != nil {
		return cs.State
	}
	return ""
}

func testInitThenApps(t *testing.T, e *Endpoint) {
	m := e.manager(t)
	pod := e.newPod(t, v1.RestartPolicyAlways, 1,
		e.busybox("app1", "sleep", "3600"),
		e.busybox("app2", "sleep", "3600"))
	pod.Spec.InitContainers = []v1.Container{e.busybox("init", "sh", "-c", "exit 0")}
	e.cleanupPod(t, m, pod)

	st := e.syncUntil(t, m, pod, 60*time.Second, "init done and both apps running", nil, func(st *kubetypes.PodStatus) bool {
		return state(st, "app1") == kubetypes.ContainerStateRunning && state(st, "app2") == kubetypes.ContainerStateRunning
	})
	init := st.FindContainerStatusByName("init")
	if init == nil || init.State != kubetypes.ContainerStateExited || init.ExitCode != 0 {
		t.Fatalf("init container: %+v, want exited 0", init)
	}
	for _, name := range []string{"app1", "app2"} {
		app := st.FindContainerStatusByName(name)
		if app.StartedAt.Before(init.FinishedAt) {
			t.Errorf("%s started at %v, before the init container finished at %v", name, app.StartedAt, init.FinishedAt)
		}
		if app.RestartCount != 0 {
			t.Errorf("%s restart count = %d, want 0", name, app.RestartCount)
		}
	}
	if n := len(st.SandboxStatuses); n != 1 {
		t.Errorf("sandboxes = %d, want 1", n)
	}
	// The steady state: another sync changes nothing.
	res := m.SyncPod(t.Context(), pod, st, nil)
	if err := res.Err(); err != nil {
		t.Fatalf("steady-state SyncPod: %v", err)
	}
	st2, err := m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(st2.ContainerStatuses) != len(st.ContainerStatuses) {
		t.Errorf("steady-state sync changed the containers: %s -> %s", describe(st), describe(st2))
	}
}

type instance struct {
	id                string
	started, finished time.Time
	restartCount      int
}

func testOnFailureBackOff(t *testing.T, e *Endpoint) {
	m := e.manager(t)
	pod := e.newPod(t, v1.RestartPolicyOnFailure, 1, e.busybox("fails", "sh", "-c", "exit 1"))
	e.cleanupPod(t, m, pod)

	seen := map[string]*instance{}
	sawBackOff := false
	collect := func(st *kubetypes.PodStatus) []*instance {
		for _, cs := range st.ContainerStatuses {
			if cs.Name != "fails" || cs.State != kubetypes.ContainerStateExited {
				continue
			}
			if cs.ExitCode != 1 {
				t.Fatalf("instance %s exited %d, want 1", cs.ID, cs.ExitCode)
			}
			seen[cs.ID] = &instance{id: cs.ID, started: cs.StartedAt, finished: cs.FinishedAt, restartCount: cs.RestartCount}
		}
		out := make([]*instance, 0, len(seen))
		for _, in := range seen {
			out = append(out, in)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].started.Before(out[j].started) })
		return out
	}
	e.syncUntil(t, m, pod, 3*time.Minute, "four failed instances",
		func(st *kubetypes.PodStatus, res kubetypes.SyncResult) {
			if errors.Is(res.Err(), kuberuntime.ErrCrashLoopBackOff) {
				sawBackOff = true
				if reason, _ := m.Reason(pod.UID, "fails"); reason != "CrashLoopBackOff" {
					t.Errorf("Reason during back-off = %q, want CrashLoopBackOff", reason)
				}
			}
		},
		func(st *kubetypes.PodStatus) bool { return len(collect(st)) >= 4 })
	inst := collect(&kubetypes.PodStatus{})
	if !sawBackOff {
		t.Errorf("SyncPod never reported ErrCrashLoopBackOff")
	}
	for i, in := range inst[:4] {
		if in.restartCount != i {
			t.Errorf("instance %d has restart count %d", i, in.restartCount)
		}
	}
	// The first restart is at once; then 10s, 20s after each failure.
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second}
	for i, w := range want {
		gap := inst[i+1].started.Sub(inst[i].finished)
		if gap < w || gap > w+e.tick()+e.Slack+time.Second {
			t.Errorf("restart %d came %v after the failure, want %v (+%v)", i+1, gap, w, e.tick()+e.Slack+time.Second)
		}
	}
}

func testNeverNotRestarted(t *testing.T, e *Endpoint) {
	m := e.manager(t)
	pod := e.newPod(t, v1.RestartPolicyNever, 1, e.busybox("once", "sh", "-c", "exit 1"))
	e.cleanupPod(t, m, pod)
	e.syncUntil(t, m, pod, 60*time.Second, "the container ran and exited", nil, func(st *kubetypes.PodStatus) bool {
		return state(st, "once") == kubetypes.ContainerStateExited
	})
	// Keep syncing for 15s of clock time: nothing may be started again.
	start := e.Clock.Now()
	var st *kubetypes.PodStatus
	for e.Clock.Since(start) < 15*time.Second {
		var err error
		st, err = m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		_ = m.SyncPod(t.Context(), pod, st, nil)
		e.Step(e.tick())
	}
	n := 0
	for _, cs := range st.ContainerStatuses {
		if cs.Name == "once" {
			n++
			if cs.State != kubetypes.ContainerStateExited || cs.ExitCode != 1 || cs.RestartCount != 0 {
				t.Errorf("instance %+v, want exited 1 with no restarts", cs)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d instances of a RestartPolicy Never container, want 1 (%s)", n, describe(st))
	}
}

func testKillPodGrace(t *testing.T, e *Endpoint) {
	m := e.manager(t)
	pod := e.newPod(t, v1.RestartPolicyAlways, 3,
		e.busybox("handles", "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"),
		e.busybox("ignores", "sh", "-c", "trap '' TERM; sleep 3600"))
	e.cleanupPod(t, m, pod)
	e.syncUntil(t, m, pod, 60*time.Second, "both running", nil, func(st *kubetypes.PodStatus) bool {
		return state(st, "handles") == kubetypes.ContainerStateRunning && state(st, "ignores") == kubetypes.ContainerStateRunning
	})
	// Let the shell install its trap.
	e.Step(time.Second)
	if e.Slack > 0 {
		e.Step(time.Second)
	}
	ctx := t.Context()
	running := e.runningPod(t, ctx, m, pod)
	if running == nil {
		t.Fatal("pod not in GetPods")
	}
	killStart := e.Clock.Now()
	var err error
	took := e.drive(t, time.Minute, func() { err = m.KillPod(ctx, pod, running, nil) })
	if err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	h, i := st.FindContainerStatusByName("handles"), st.FindContainerStatusByName("ignores")
	if h.State != kubetypes.ContainerStateExited || i.State != kubetypes.ContainerStateExited {
		t.Fatalf("after KillPod: %s, want both exited", describe(st))
	}
	if d := h.FinishedAt.Sub(killStart); d > time.Second+e.Slack {
		t.Errorf("the SIGTERM-handling container stopped %v after KillPod, want within 1s", d)
	}
	if h.ExitCode != 0 {
		t.Errorf("the SIGTERM-handling container exited %d, want 0", h.ExitCode)
	}
	if d := i.FinishedAt.Sub(killStart); d < 3*time.Second-e.tick() || d > 3*time.Second+e.Slack+e.tick() {
		t.Errorf("the SIGTERM-ignoring container stopped %v after KillPod, want its 3s grace period", d)
	}
	if i.ExitCode != 137 {
		t.Errorf("the SIGTERM-ignoring container exited %d, want 137 (killed)", i.ExitCode)
	}
	if took > 3*time.Second+e.Slack+time.Second {
		t.Errorf("KillPod took %v, want about the 3s grace period", took)
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetState().String() != "SANDBOX_NOTREADY" {
			t.Errorf("sandbox %s is %v after KillPod, want NOTREADY", sb.GetId(), sb.GetState())
		}
	}
}

func testImageNeverPull(t *testing.T, e *Endpoint) {
	m := e.manager(t)
	c := e.busybox("app", "sleep", "3600")
	c.Image = e.MissingImage
	c.ImagePullPolicy = v1.PullNever
	pod := e.newPod(t, v1.RestartPolicyAlways, 1, c)
	e.cleanupPod(t, m, pod)
	ctx := t.Context()
	for range 3 {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		res := m.SyncPod(ctx, pod, st, nil)
		if !errors.Is(res.Err(), kuberuntime.ErrImageNeverPull) {
			t.Fatalf("SyncPod error = %v, want ErrImageNeverPull", res.Err())
		}
		if reason, msg := m.Reason(pod.UID, "app"); reason != "ErrImageNeverPull" || msg == "" {
			t.Errorf("Reason = %q %q, want ErrImageNeverPull with a message", reason, msg)
		}
		e.Step(e.tick())
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ContainerStatuses) != 0 || len(st.SandboxStatuses) != 0 {
		t.Fatalf("a pod whose image may never be pulled created %s; want nothing", describe(st))
	}
}
