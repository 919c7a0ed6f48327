package kuberuntime

import (
	"context"
	"reflect"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCalls counts the list calls among the recorded CRI calls.
func listCalls(cri *stubCRI) int {
	cri.mu.Lock()
	defer cri.mu.Unlock()
	n := 0
	for _, c := range cri.calls {
		if c == "ListPodSandbox" || c == "ListContainers" {
			n++
		}
	}
	return n
}

// afterSync reads the pod after res both ways and checks they agree and
// that the read after the sync listed nothing; calls is how many CRI calls
// that read made.
func afterSync(t *testing.T, m *Manager, cri *stubCRI, before *kubetypes.PodStatus, res kubetypes.SyncResult) (st *kubetypes.PodStatus, calls int) {
	t.Helper()
	ctx := context.Background()
	pod := simplePod("a", "img:1", "img:1")
	cri.resetCalls()
	got, err := m.GetPodStatusAfterSync(ctx, pod, before, res)
	if err != nil {
		t.Fatal(err)
	}
	if n := listCalls(cri); n != 0 {
		t.Fatalf("the read after a sync listed the runtime %d times: calls %v", n, cri.calls)
	}
	calls = len(cri.calls)
	want, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read after sync:\n%+v\nlisted:\n%+v", got, want)
	}
	return got, calls
}

func TestGetPodStatusAfterSyncReadsWhatTheSyncKnew(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	ctx := context.Background()
	pod := simplePod("a", "img:1", "img:1")
	empty := &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}

	// First sync: a new sandbox and two containers, known only from the steps.
	res := m.SyncPod(ctx, pod, empty, nil)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	st, calls := afterSync(t, m, cri, empty, res)
	if len(st.SandboxStatuses) != 1 || len(st.ContainerStatuses) != 2 || len(st.IPs) != 1 {
		t.Fatalf("status after the first sync: %+v", st)
	}
	if calls != 3 {
		t.Fatalf("read after the first sync took %d calls, want 3: one per object", calls)
	}

	// c0 exits; the next sync starts a new instance. The read has the old
	// instances (from before) and the new one (from the step).
	exited := st.FindContainerStatusByName("c0").ID
	cri.mu.Lock()
	cri.containers[exited].State = runtimeapi.ContainerState_CONTAINER_EXITED
	cri.containers[exited].FinishedAt = clk.Now().UnixNano()
	cri.mu.Unlock()
	before, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	res = m.SyncPod(ctx, pod, before, nil)
	if err := res.Err(); err != nil || len(res.Steps) != 1 {
		t.Fatalf("restart: steps %+v, err %v", res.Steps, err)
	}
	st, _ = afterSync(t, m, cri, before, res)
	if len(st.ContainerStatuses) != 3 || st.FindContainerStatusByName("c0").State != kubetypes.ContainerStateRunning {
		t.Fatalf("status after the restart: %+v", st.ContainerStatuses)
	}

	// A container of before removed since (garbage collection) is left out,
	// as a listing would.
	cri.mu.Lock()
	delete(cri.containers, exited)
	cri.mu.Unlock()
	st, _ = afterSync(t, m, cri, before, res)
	if len(st.ContainerStatuses) != 2 {
		t.Fatalf("status without the removed instance: %+v", st.ContainerStatuses)
	}
}

// lateCreateCRI makes the container, then fails CreateContainer as a
// timed-out call would: the container exists but its ID is unknown.
type lateCreateCRI struct{ *stubCRI }

func (l lateCreateCRI) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	if _, err := l.stubCRI.CreateContainer(ctx, sb, cfg, sbCfg); err != nil {
		return "", err
	}
	return "", status.Error(codes.DeadlineExceeded, "context deadline exceeded")
}

func TestGetPodStatusAfterSyncListsAfterAFailedStep(t *testing.T) {
	_, cri, clk := newTestManager(t, nil)
	m, err := New(Config{Runtime: lateCreateCRI{cri}, Images: cri, Clock: clk, PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m.builder = &stubBuilder{}
	ctx := context.Background()
	pod := simplePod("a", "img:1")
	empty := &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	res := m.SyncPod(ctx, pod, empty, nil)
	if res.Err() == nil {
		t.Fatal("CreateContainer failed, but the sync did not")
	}
	cri.resetCalls()
	st, err := m.GetPodStatusAfterSync(ctx, pod, empty, res)
	if err != nil {
		t.Fatal(err)
	}
	if listCalls(cri) != 2 {
		t.Fatalf("after a failed step the pod must be listed: calls %v", cri.calls)
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State != kubetypes.ContainerStateCreated {
		t.Fatalf("the container the failed call made is missing: %+v", st.ContainerStatuses)
	}
}

func TestGetPodStatusAfterSyncWithoutBeforeLists(t *testing.T) {
	m, cri, _ := newTestManager(t, nil)
	ctx := context.Background()
	pod := simplePod("a", "img:1")
	res := m.SyncPod(ctx, pod, nil, nil)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	cri.resetCalls()
	st, err := m.GetPodStatusAfterSync(ctx, pod, nil, res)
	if err != nil {
		t.Fatal(err)
	}
	if listCalls(cri) != 2 || len(st.ContainerStatuses) != 1 {
		t.Fatalf("without a status before the sync: calls %v, status %+v", cri.calls, st)
	}
	// A status error other than NotFound is an error, not a skipped object.
	cri.errs["ContainerStatus"] = status.Error(codes.Unavailable, "down")
	if _, err := m.GetPodStatusAfterSync(ctx, pod, st, kubetypes.SyncResult{Steps: []kubetypes.StepResult{{Action: kubetypes.ActionStartContainer, ID: "x"}}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want the runtime's Unavailable", err)
	}
}

// TestPodStatusFromEventMatchesARead: a container event carrying the pod's
// sandbox status and its containers' statuses (as containerd sends them)
// gives the status GetPodStatus reads, with no CRI call; an event without
// them gives none.
func TestPodStatusFromEventMatchesARead(t *testing.T) {
	m, cri, clk := newTestManager(t, nil)
	ctx := context.Background()
	pod := simplePod("a", "img:1", "img:1")
	empty := &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	if err := m.SyncPod(ctx, pod, empty, nil).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	exited := st.FindContainerStatusByName("c0").ID
	cri.mu.Lock()
	cri.containers[exited].State = runtimeapi.ContainerState_CONTAINER_EXITED
	cri.containers[exited].FinishedAt = clk.Now().UnixNano()
	cri.containers[exited].ExitCode = 3
	cri.mu.Unlock()
	want, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}

	// The event as containerd builds it: the sandbox's status and that of
	// every container in the sandbox.
	sb, err := cri.PodSandboxStatus(ctx, want.SandboxStatuses[0].GetId(), false)
	if err != nil {
		t.Fatal(err)
	}
	ev := &runtimeapi.ContainerEventResponse{ContainerId: exited, ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		CreatedAt: clk.Now().UnixNano(), PodSandboxStatus: sb.GetStatus()}
	for _, cs := range want.ContainerStatuses {
		r, err := cri.ContainerStatus(ctx, cs.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		ev.ContainersStatuses = append(ev.ContainersStatuses, r.GetStatus())
	}
	cri.resetCalls()
	got, ok := m.PodStatusFromEvent(ev)
	if !ok {
		t.Fatal("not ok")
	}
	if len(cri.calls) != 0 {
		t.Fatalf("CRI calls %v", cri.calls)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from the event:\n%+v\nread:\n%+v", got, want)
	}
	if c := got.FindContainerStatusByName("c0"); c.State != kubetypes.ContainerStateExited || c.ExitCode != 3 {
		t.Fatalf("c0 %+v", c)
	}

	for name, bad := range map[string]*runtimeapi.ContainerEventResponse{
		"no sandbox status":     {ContainerId: exited, ContainersStatuses: ev.ContainersStatuses},
		"no sandbox metadata":   {ContainerId: exited, PodSandboxStatus: &runtimeapi.PodSandboxStatus{Id: "x"}, ContainersStatuses: ev.ContainersStatuses},
		"no container statuses": {ContainerId: exited, PodSandboxStatus: ev.PodSandboxStatus},
	} {
		if st, ok := m.PodStatusFromEvent(bad); ok || st != nil {
			t.Errorf("%s: ok %v, %+v", name, ok, st)
		}
	}
}
