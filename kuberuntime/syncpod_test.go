package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func simplePod(uid string, images ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid), Name: "p-" + uid, Namespace: "ns"}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Image: img, ImagePullPolicy: v1.PullIfNotPresent})
	}
	return p
}

func syncAndStatus(t *testing.T, m *Manager, pod *v1.Pod) (kubetypes.SyncResult, *kubetypes.PodStatus) {
	t.Helper()
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	res := m.SyncPod(ctx, pod, st, nil)
	st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return res, st
}

func TestSyncPodStartsNewPodThenIsNoOp(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	pod := simplePod("a", "img:1", "img:2")
	res, st := syncAndStatus(t, m, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"RunPodSandbox", "PullImage", "CreateContainer", "StartContainer", "PullImage", "CreateContainer", "StartContainer"}
	if got := cri.writeCalls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if len(st.SandboxStatuses) != 1 || len(st.ContainerStatuses) != 2 || len(st.IPs) != 1 {
		t.Fatalf("status after start: %d sandboxes, %d containers, IPs %v", len(st.SandboxStatuses), len(st.ContainerStatuses), st.IPs)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State != kubetypes.ContainerStateRunning || cs.Hash != HashContainer(containerSpec(pod, cs.Name)) || cs.Type != ContainerTypeRegular {
			t.Fatalf("container %+v", cs)
		}
	}
	cri.resetCalls()
	res = m.SyncPod(context.Background(), pod, st, nil)
	if res.Err() != nil || len(res.Steps) != 0 {
		t.Fatalf("no-op sync: %+v", res)
	}
	if w := cri.writeCalls(); len(w) != 0 {
		t.Fatalf("no-op sync made CRI writes %v", w)
	}
}

func TestSyncPodInvalidPod(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	dup := simplePod("d", "img:1", "img:1")
	dup.Spec.Containers[1].Name = dup.Spec.Containers[0].Name
	noName := simplePod("n", "img:1")
	noName.Spec.Containers[0].Name = ""
	for name, tc := range map[string]struct {
		pod   *v1.Pod
		field string
	}{
		"nil":           {nil, "pod is nil"},
		"no containers": {simplePod("e"), "spec.containers"},
		"empty name":    {noName, "spec.containers[0].name"},
		"duplicate":     {dup, "duplicates"},
	} {
		t.Run(name, func(t *testing.T) {
			res := m.SyncPod(context.Background(), tc.pod, nil, nil)
			err := res.Err()
			if !errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want ErrInvalidPod naming %q", err, tc.field)
			}
		})
	}
	if w := cri.writeCalls(); len(w) != 0 {
		t.Fatalf("writes for invalid pods: %v", w)
	}
}

func TestSyncPodImageNeverPull(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	pod := simplePod("n", "missing:1")
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	res, _ := syncAndStatus(t, m, pod)
	if !errors.Is(res.Err(), ErrImageNeverPull) {
		t.Fatalf("err = %v", res.Err())
	}
	for _, c := range cri.writeCalls() {
		if c == "CreateContainer" || c == "PullImage" {
			t.Fatalf("unexpected %s", c)
		}
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != ReasonErrImageNeverPull {
		t.Fatalf("reason = %q", r)
	}
}

func TestSyncPodImagePullBackOff(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("b", "img:1")
	fail := status.Error(codes.Unavailable, "registry down")
	cri.pullErrs = []error{fail, fail, nil}
	res, _ := syncAndStatus(t, m, pod)
	if !errors.Is(res.Err(), ErrImagePull) {
		t.Fatalf("first: %v", res.Err())
	}
	res, _ = syncAndStatus(t, m, pod)
	if !errors.Is(res.Err(), ErrImagePullBackOff) || !strings.Contains(res.Err().Error(), "registry down") {
		t.Fatalf("in back-off: %v", res.Err())
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != ReasonImagePullBackOff {
		t.Fatalf("reason %q", r)
	}
	clk.Step(10 * time.Second)
	res, _ = syncAndStatus(t, m, pod) // second failure: back-off doubles to 20s
	if !errors.Is(res.Err(), ErrImagePull) {
		t.Fatalf("after 10s: %v", res.Err())
	}
	clk.Step(10 * time.Second)
	if res, _ = syncAndStatus(t, m, pod); !errors.Is(res.Err(), ErrImagePullBackOff) {
		t.Fatalf("10s into a 20s back-off: %v", res.Err())
	}
	clk.Step(10 * time.Second)
	if res, _ = syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatalf("after back-off: %v", res.Err())
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != "" {
		t.Fatalf("reason not cleared: %q", r)
	}
}

func TestSyncPodPullTriesEachAuth(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	m.builder = &stubBuilder{auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}
	cri.pullErrs = []error{errors.New("denied")}
	pod := simplePod("au", "img:1")
	res := m.SyncPod(context.Background(), pod, nil, []v1.Secret{{}})
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	n := 0
	for _, c := range cri.writeCalls() {
		if c == "PullImage" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("pulls = %d, want 2", n)
	}
}

func TestSyncPodCrashLoopBackOff(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("cl", "img:1")
	crash := func() {
		cri.mu.Lock()
		for _, c := range cri.containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 1, clk.Now().UnixNano()
			}
		}
		cri.mu.Unlock()
	}
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	crash()
	// First restart is immediate, and arms a 10s back-off.
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	crash()
	res, _ := syncAndStatus(t, m, pod)
	if !errors.Is(res.Err(), ErrCrashLoopBackOff) {
		t.Fatalf("err = %v", res.Err())
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != ReasonCrashLoopBackOff {
		t.Fatalf("reason %q", r)
	}
	clk.Step(10 * time.Second)
	res, st := syncAndStatus(t, m, pod)
	if res.Err() != nil {
		t.Fatalf("after 10s: %v", res.Err())
	}
	if cs := st.FindContainerStatusByName("c0"); cs.RestartCount != 2 {
		t.Fatalf("restart count %d", cs.RestartCount)
	}
	crash()
	clk.Step(10 * time.Second)
	if res, _ = syncAndStatus(t, m, pod); !errors.Is(res.Err(), ErrCrashLoopBackOff) {
		t.Fatalf("back-off should be 20s now: %v", res.Err())
	}
	// Running for more than 10 minutes resets the back-off.
	clk.Step(11 * time.Minute)
	crash()
	if res, _ = syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatalf("after a long run: %v", res.Err())
	}
}

func TestSyncPodStartFailures(t *testing.T) {
	t.Run("config error", func(t *testing.T) {
		m, cri, _ := newTestManager(t, nil)
		m.builder = &stubBuilder{configErr: errors.New("env var FOO: secret missing")}
		pod := simplePod("ce", "img:1")
		res := m.SyncPod(context.Background(), pod, nil, nil)
		if !errors.Is(res.Err(), ErrCreateContainerConfig) {
			t.Fatal(res.Err())
		}
		for _, c := range cri.writeCalls() {
			if c == "CreateContainer" {
				t.Fatal("created despite config error")
			}
		}
		if r, msg := m.Reason(pod.UID, "c0"); r != ReasonCreateContainerConfigError || !strings.Contains(msg, "secret missing") {
			t.Fatalf("reason %q %q", r, msg)
		}
	})
	t.Run("start error", func(t *testing.T) {
		m, cri, _ := newTestManager(t, nil)
		cri.errs["StartContainer"] = errors.New("exec format error")
		pod := simplePod("se", "img:1")
		res := m.SyncPod(context.Background(), pod, nil, nil)
		if !errors.Is(res.Err(), ErrRunContainer) {
			t.Fatal(res.Err())
		}
		if r, _ := m.Reason(pod.UID, "c0"); r != ReasonRunContainerError {
			t.Fatalf("reason %q", r)
		}
	})
	t.Run("sandbox error", func(t *testing.T) {
		m, cri, _ := newTestManager(t, nil)
		cri.errs["RunPodSandbox"] = errors.New("no cni")
		res := m.SyncPod(context.Background(), simplePod("sb", "img:1"), nil, nil)
		if !errors.Is(res.Err(), ErrCreateSandbox) || len(res.Steps) != 1 || res.Steps[0].Action != kubetypes.ActionCreateSandbox {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("hanging runtime is bounded by the deadline", func(t *testing.T) {
		m, cri, _ := newTestManager(t, nil)
		cri.hang["RunPodSandbox"] = true
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res := m.SyncPod(ctx, simplePod("h", "img:1"), nil, nil)
		if res.Err() == nil {
			t.Fatal("no error from a hanging runtime")
		}
	})
}

func TestSyncPodPostStartHookFailureKillsContainer(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	cri.execErr = errors.New("exit status 1")
	pod := simplePod("ps", "img:1")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	res := m.SyncPod(context.Background(), pod, nil, nil)
	if !errors.Is(res.Err(), ErrPostStartHook) {
		t.Fatal(res.Err())
	}
	w := cri.writeCalls()
	if w[len(w)-1] != "StopContainer" {
		t.Fatalf("writes %v: container not stopped", w)
	}
	if r, _ := m.Reason(pod.UID, "c0"); r != ReasonPostStartHookError {
		t.Fatalf("reason %q", r)
	}
}

func TestSyncPodInitContainersOneAtATime(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	pod := simplePod("init", "app:1")
	pod.Spec.InitContainers = []v1.Container{{Name: "i0", Image: "init:1"}, {Name: "i1", Image: "init:1"}}
	finish := func() {
		cri.mu.Lock()
		for _, c := range cri.containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			}
		}
		cri.mu.Unlock()
	}
	var order []string
	for i := 0; i < 3; i++ {
		res, _ := syncAndStatus(t, m, pod)
		if res.Err() != nil {
			t.Fatal(res.Err())
		}
		for _, s := range res.Steps {
			if s.Action == kubetypes.ActionStartContainer {
				order = append(order, s.Target)
			}
		}
		if i < 2 {
			finish()
		}
	}
	if want := []string{"i0", "i1", "c0"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("start order %v, want %v", order, want)
	}
}

func TestKillPodGraceAndOrder(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	always := v1.ContainerRestartPolicyAlways
	pod := simplePod("k", "app:1")
	pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "side:1", RestartPolicy: &always}}
	tgps := int64(45)
	pod.Spec.TerminationGracePeriodSeconds = &tgps
	for i := 0; i < 2; i++ { // sidecar, then app
		if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
			t.Fatal(res.Err())
		}
	}
	pods, err := m.GetPods(context.Background(), false)
	if err != nil || len(pods) != 1 || len(pods[0].Containers) != 2 {
		t.Fatalf("GetPods = %v, %v", pods, err)
	}
	cri.resetCalls()
	if err := m.KillPod(context.Background(), pod, pods[0], nil); err != nil {
		t.Fatal(err)
	}
	w := cri.writeCalls()
	if !reflect.DeepEqual(w, []string{"StopContainer", "StopContainer", "StopPodSandbox"}) {
		t.Fatalf("writes %v", w)
	}
	// The sidecar stops after the app container.
	cri.mu.Lock()
	if !reflect.DeepEqual(cri.stopOrder, []string{"c0", "side"}) {
		t.Errorf("stop order %v, want app before sidecar", cri.stopOrder)
	}
	for id, g := range cri.stops {
		if g != 45 {
			t.Errorf("grace of %s = %d, want 45", id, g)
		}
	}
	cri.mu.Unlock()
	// Orphan: no spec, grace from the recorded annotation; override wins.
	pods, _ = m.GetPods(context.Background(), true)
	one := int64(0)
	if err := m.KillPod(context.Background(), nil, pods[0], &one); err != nil {
		t.Fatal(err)
	}
	cri.mu.Lock()
	for id, g := range cri.stops {
		if g != MinimumGracePeriodSeconds && g != 45 {
			t.Errorf("grace of %s = %d", id, g)
		}
	}
	cri.mu.Unlock()
}

func TestKillPodAlreadyGoneIsFine(t *testing.T) {
	m, _, _ := newTestManager(t, nil)
	running := &kubetypes.Pod{ID: "gone", Containers: []*kubetypes.Container{{ID: "nope", Name: "x", State: kubetypes.ContainerStateRunning}}, Sandboxes: []*kubetypes.Container{{ID: "nosb"}}}
	if err := m.KillPod(context.Background(), nil, running, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.KillPod(context.Background(), nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGetPodsIgnoresForeignObjects(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	if res := m.SyncPod(context.Background(), simplePod("g", "img:1"), nil, nil); res.Err() != nil {
		t.Fatal(res.Err())
	}
	cri.mu.Lock()
	cri.sandboxes["foreign"] = &runtimeapi.PodSandboxStatus{Id: "foreign", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"x": "y"}}
	cri.mu.Unlock()
	pods, err := m.GetPods(context.Background(), true)
	if err != nil || len(pods) != 1 || pods[0].ID != "uid-g" || len(pods[0].Sandboxes) != 1 {
		t.Fatalf("pods %+v err %v", pods, err)
	}
}

func TestGetPodStatusSkipsVanished(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	pod := simplePod("v", "img:1")
	if res := m.SyncPod(context.Background(), pod, nil, nil); res.Err() != nil {
		t.Fatal(res.Err())
	}
	cri.errs["ContainerStatus"] = status.Error(codes.NotFound, "gone")
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil || len(st.ContainerStatuses) != 0 || len(st.SandboxStatuses) != 1 {
		t.Fatalf("status %+v err %v", st, err)
	}
	cri.errs["ContainerStatus"] = errors.New("broken")
	if _, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace); err == nil {
		t.Fatal("want error")
	}
}

func TestGarbageCollect(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	pod := simplePod("gc", "img:1")
	kill := func() {
		cri.mu.Lock()
		for _, c := range cri.containers {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		}
		cri.mu.Unlock()
	}
	for i := 0; i < 3; i++ { // three dead instances
		if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
			t.Fatal(res.Err())
		}
		kill()
		clk.Step(5 * time.Minute)
	}
	logs := m.cfg.PodLogsRoot
	for _, d := range []string{"ns_p-gc_uid-gc", "ns_other_uid-other", "bad_name"} {
		if err := os.MkdirAll(filepath.Join(logs, d, "c0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.GarbageCollect(context.Background(), kubetypes.GCPolicy{}, nil, true); err != nil {
		t.Fatal(err)
	}
	st, _ := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if len(st.ContainerStatuses) != 1 {
		t.Fatalf("kept %d dead instances, want 1", len(st.ContainerStatuses))
	}
	for d, want := range map[string]bool{"ns_p-gc_uid-gc": true, "ns_other_uid-other": false, "bad_name": true} {
		_, err := os.Stat(filepath.Join(logs, d))
		if (err == nil) != want {
			t.Errorf("log dir %s exists=%t, want %t", d, err == nil, want)
		}
	}
	// The pod goes away: everything of it is removable.
	cri.mu.Lock()
	for _, sb := range cri.sandboxes {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	cri.mu.Unlock()
	if err := m.GarbageCollect(context.Background(), kubetypes.GCPolicy{}, allRemovable{}, true); err != nil {
		t.Fatal(err)
	}
	cri.mu.Lock()
	n, s := len(cri.containers), len(cri.sandboxes)
	cri.mu.Unlock()
	if n != 0 || s != 0 {
		t.Fatalf("left %d containers, %d sandboxes", n, s)
	}
	if _, err := os.Stat(filepath.Join(logs, "ns_p-gc_uid-gc")); !os.IsNotExist(err) {
		t.Fatal("log dir of removed pod kept")
	}
}

type allRemovable struct{}

func (allRemovable) ShouldPodContentBeRemoved(uid types.UID) bool { return true }
func (allRemovable) ShouldPodRuntimeBeRemoved(uid types.UID) bool { return true }

// The calls of a first sync: a host-network pod's new sandbox is not asked
// for its status (its IPs are the node's), a pod-network one's is; an
// image with pull policy Never is asked about once per round, not once
// before the sandbox and again before the container.
func TestSyncPodFirstSyncCalls(t *testing.T) {
	for _, hostNetwork := range []bool{true, false} {
		m, cri, _ := newTestManager(t, nil)
		cri.mu.Lock()
		cri.images["img:1"] = true
		cri.mu.Unlock()
		pod := simplePod("a", "img:1", "img:1")
		pod.Spec.HostNetwork = hostNetwork
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].ImagePullPolicy = v1.PullNever
		}
		cri.resetCalls()
		res := m.SyncPod(context.Background(), pod, &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil)
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		cri.mu.Lock()
		got := append([]string(nil), cri.calls...)
		cri.mu.Unlock()
		want := []string{"ImageStatus", "RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer", "CreateContainer", "StartContainer"}
		if hostNetwork {
			want = slices.Delete(want, 2, 3)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("hostNetwork=%v: calls %v, want %v", hostNetwork, got, want)
		}
	}
}
