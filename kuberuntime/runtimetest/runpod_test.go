package runtimetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/runtimetest"
	"github.com/nodekit/nodekit/kubetypes"
)

func newRunPodFake(t *testing.T) (*fake.Runtime, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	return rt, fc
}

func testPod(init []v1.Container, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{InitContainers: init, Containers: containers},
	}
}

func TestRunPodLabelsAndContainers(t *testing.T) {
	ctx := context.Background()
	rt, fc := newRunPodFake(t)
	pod := testPod(
		[]v1.Container{{Name: "setup", Image: "busybox", Command: []string{"true"}}},
		v1.Container{Name: "app", Image: "busybox"},
		v1.Container{Name: "side", Image: "busybox"},
	)
	st, err := runtimetest.RunPod(ctx, rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SandboxStatuses) != 1 || st.SandboxStatuses[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandboxes = %v, want one ready", st.SandboxStatuses)
	}
	sb := st.SandboxStatuses[0]
	for k, want := range map[string]string{kuberuntime.LabelPodName: "web", kuberuntime.LabelPodNamespace: "ns", kuberuntime.LabelPodUID: "uid-1", "app": "web"} {
		if got := sb.GetLabels()[k]; got != want {
			t.Errorf("sandbox label %s = %q, want %q", k, got, want)
		}
	}
	state := map[string]kubetypes.ContainerState{}
	for _, cs := range st.ContainerStatuses {
		state[cs.Name] = cs.State
	}
	want := map[string]kubetypes.ContainerState{
		"setup": kubetypes.ContainerStateExited, "app": kubetypes.ContainerStateRunning, "side": kubetypes.ContainerStateRunning,
	}
	if len(state) != len(want) {
		t.Fatalf("containers = %v, want %v", state, want)
	}
	for n, s := range want {
		if state[n] != s {
			t.Errorf("container %s is %v, want %v", n, state[n], s)
		}
	}
	// Every container carries the identity labels the engine and the PLEG
	// select on.
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kuberuntime.LabelPodUID: "uid-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d containers with the pod's UID label, want 3", len(cs))
	}
	for _, c := range cs {
		l := c.GetLabels()
		if l[kuberuntime.LabelPodName] != "web" || l[kuberuntime.LabelPodNamespace] != "ns" || l[kuberuntime.LabelContainerName] != c.GetMetadata().GetName() {
			t.Errorf("container %s labels = %v", c.GetMetadata().GetName(), l)
		}
		if c.GetPodSandboxId() != sb.GetId() {
			t.Errorf("container %s is in sandbox %s, want %s", c.GetMetadata().GetName(), c.GetPodSandboxId(), sb.GetId())
		}
	}
	// A second call finds nothing to do.
	calls := rt.CountCalls("CreateContainer")
	if _, err := runtimetest.RunPod(ctx, rt, pod, runtimetest.RunPodOptions{Clock: fc}); err != nil {
		t.Fatal(err)
	}
	if got := rt.CountCalls("CreateContainer"); got != calls {
		t.Errorf("second RunPod created %d containers, want none", got-calls)
	}
}

func TestRunPodStopsAtRunningInitContainer(t *testing.T) {
	rt, fc := newRunPodFake(t)
	pod := testPod([]v1.Container{{Name: "wait", Image: "busybox", Command: []string{"sleep", "30"}}}, v1.Container{Name: "app", Image: "busybox"})
	st, err := runtimetest.RunPod(context.Background(), rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].Name != "wait" || st.ContainerStatuses[0].State != kubetypes.ContainerStateRunning {
		t.Fatalf("containers = %+v, want only init container wait, running", st.ContainerStatuses)
	}
}

func TestRunPodCrashLoopIsNoError(t *testing.T) {
	rt, fc := newRunPodFake(t)
	pod := testPod(nil, v1.Container{Name: "crash", Image: "busybox", Command: []string{"sh", "-c", "exit 3"}})
	st, err := runtimetest.RunPod(context.Background(), rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	// As the kubelet: the first exit restarts at once, the second starts the
	// back-off, where RunPod stops.
	if len(st.ContainerStatuses) != 2 {
		t.Fatalf("%d instances, want 2 (one restart without back-off)", len(st.ContainerStatuses))
	}
	newest := st.ContainerStatuses[0]
	if newest.State != kubetypes.ContainerStateExited || newest.ExitCode != 3 || newest.RestartCount != 1 {
		t.Fatalf("newest instance = %+v, want exited with 3, restart count 1", newest)
	}
}

func TestRunPodErrors(t *testing.T) {
	ctx := context.Background()
	rt, _ := newRunPodFake(t)
	for name, pod := range map[string]*v1.Pod{
		"nil":    nil,
		"no UID": {ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b"}},
	} {
		if _, err := runtimetest.RunPod(ctx, rt, pod); !errors.Is(err, runtimetest.ErrRunPod) {
			t.Errorf("%s: err = %v, want ErrRunPod", name, err)
		}
	}
	boom := errors.New("boom")
	rt.InjectError("RunPodSandbox", boom, 1)
	_, err := runtimetest.RunPod(ctx, rt, testPod(nil, v1.Container{Name: "app", Image: "busybox"}))
	if !errors.Is(err, runtimetest.ErrRunPod) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrRunPod wrapping the runtime's error", err)
	}
}
