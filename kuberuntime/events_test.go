package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/events"
)

// newEventsManager is newTestManager with a fake recorder on its clock.
func newEventsManager(t *testing.T) (*Manager, *stubCRI, *events.Fake) {
	t.Helper()
	m, cri, clk := newTestManager(t, nil)
	rec, err := events.NewFake(events.FakeConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m.rec = rec
	return m, cri, rec
}

// want is one expected event: type, reason, message (a prefix when it
// ends in "..."), and the container (field path) or "" for the pod.
type want struct{ typ, reason, msg, container string }

func checkEvents(t *testing.T, rec *events.Fake, pod *v1.Pod, wants ...want) {
	t.Helper()
	got := rec.Events()
	if len(got) != len(wants) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(wants), rec)
	}
	for i, w := range wants {
		e := got[i]
		msgOK := e.Message == w.msg
		if p, ok := strings.CutSuffix(w.msg, "..."); ok {
			msgOK = strings.HasPrefix(e.Message, p)
		}
		path := ""
		if w.container != "" {
			path = "spec.containers{" + w.container + "}"
		}
		if e.Type != w.typ || e.Reason != w.reason || !msgOK || e.Object.Kind != "Pod" || e.Object.UID != pod.UID ||
			e.Object.Name != pod.Name || e.Object.Namespace != pod.Namespace || e.Object.FieldPath != path {
			t.Errorf("event %d: %s (object %+v)\nwant %s %s %s: %s", i, e, e.Object, w.typ, w.reason, path, w.msg)
		}
	}
}

const (
	normal  = v1.EventTypeNormal
	warning = v1.EventTypeWarning
)

func TestEventsStartPullCreateStart(t *testing.T) {
	m, _, rec := newEventsManager(t)
	pod := simplePod("a", "img:1", "img:1")
	if res, _ := syncAndStatus(t, m, pod); res.Err() != nil {
		t.Fatal(res.Err())
	}
	checkEvents(t, rec, pod,
		want{normal, "Pulling", `Pulling image "img:1"`, "c0"},
		want{normal, "Pulled", `Successfully pulled image "img:1" in 0s (0s including waiting)`, "c0"},
		want{normal, "Created", "Container created", "c0"},
		want{normal, "Started", "Container started", "c0"},
		want{normal, "Pulled", `Container image "img:1" already present on machine`, "c1"},
		want{normal, "Created", "Container created", "c1"},
		want{normal, "Started", "Container started", "c1"},
	)

}

func TestEventsImagePullFailureAndBackOff(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	pod := simplePod("b", "img:1")
	cri.pullErrs = []error{status.Error(codes.NotFound, "img:1 not found")}
	syncAndStatus(t, m, pod)
	syncAndStatus(t, m, pod) // in back-off
	checkEvents(t, rec, pod,
		want{normal, "Pulling", `Pulling image "img:1"`, "c0"},
		want{warning, "Failed", `Failed to pull image "img:1": rpc error: code = NotFound desc = img:1 not found`, "c0"},
		want{warning, "Failed", "Error: ErrImagePull", "c0"},
		want{normal, "BackOff", `Back-off pulling image "img:1": ...`, "c0"},
		want{warning, "Failed", "Error: ImagePullBackOff", "c0"},
	)
}

func TestEventsImageNeverPullAndInspectFailed(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	pod := simplePod("n", "missing:1")
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	syncAndStatus(t, m, pod)
	checkEvents(t, rec, pod,
		want{warning, "ErrImageNeverPull", `Container image "missing:1" is not present with pull policy of Never`, "c0"},
		want{warning, "Failed", "Error: ErrImageNeverPull", "c0"},
	)

	rec.Reset()
	pod = simplePod("i", "img:1")
	cri.errs["ImageStatus"] = status.Error(codes.Internal, "disk on fire")
	// The sandbox starts (the image check before it counts "unknown" as
	// "let the normal path decide"), then the container's check fails.
	m.SyncPod(context.Background(), pod, nil, nil)
	checkEvents(t, rec, pod,
		want{warning, "InspectFailed", `Failed to inspect image "img:1": rpc error: code = Internal desc = disk on fire`, "c0"},
		want{warning, "Failed", "Error: ImageInspectError", "c0"},
	)
}

func TestEventsCrashLoopBackOff(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	pod := simplePod("cl", "img:1")
	crash := func() {
		cri.mu.Lock()
		for _, c := range cri.containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 1, cri.clock.Now().UnixNano()
			}
		}
		cri.mu.Unlock()
	}
	syncAndStatus(t, m, pod)
	crash()
	syncAndStatus(t, m, pod) // immediate restart
	crash()
	rec.Reset()
	if res, _ := syncAndStatus(t, m, pod); !errors.Is(res.Err(), ErrCrashLoopBackOff) {
		t.Fatal(res.Err())
	}
	checkEvents(t, rec, pod,
		want{warning, "BackOff", "Back-off restarting failed container c0 in pod p-cl_ns(uid-cl)", "c0"},
	)
}

func TestEventsCreateAndStartErrors(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	cri.images["img:1"] = true
	cri.errs["StartContainer"] = status.Error(codes.Unknown, "exec format error")
	pod := simplePod("se", "img:1")
	m.SyncPod(context.Background(), pod, nil, nil)
	checkEvents(t, rec, pod,
		want{normal, "Pulled", `Container image "img:1" already present on machine`, "c0"},
		want{normal, "Created", "Container created", "c0"},
		want{warning, "Failed", "Error: exec format error", "c0"},
	)

	m, cri, rec = newEventsManager(t)
	cri.images["img:1"] = true
	m.builder = &stubBuilder{configErr: errors.New(`configmap "cfg" not found`)}
	pod = simplePod("ce", "img:1")
	m.SyncPod(context.Background(), pod, nil, nil)
	checkEvents(t, rec, pod,
		want{normal, "Pulled", `Container image "img:1" already present on machine`, "c0"},
		want{warning, "Failed", "Error: ...", "c0"},
	)
	if e := rec.Events()[1]; !strings.Contains(e.Message, `configmap "cfg" not found`) {
		t.Errorf("config error event %q does not say what is missing", e.Message)
	}
}

func TestEventsSandbox(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	cri.errs["RunPodSandbox"] = status.Error(codes.Unknown, "no cni")
	pod := simplePod("sb", "img:1")
	m.SyncPod(context.Background(), pod, nil, nil)
	checkEvents(t, rec, pod,
		want{warning, "FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: code = Unknown desc = no cni", ""},
	)

	m, _, rec = newEventsManager(t)
	pod, st := basePod()
	st.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	m.SyncPod(context.Background(), pod, st, nil)
	if got := rec.WithReason("SandboxChanged"); len(got) != 1 || got[0].Type != normal ||
		got[0].Message != "Pod sandbox changed, it will be killed and re-created." || got[0].Object.UID != pod.UID || got[0].Object.FieldPath != "" {
		t.Fatalf("SandboxChanged events:\n%s", rec)
	}
}

func TestEventsHooksAndKilling(t *testing.T) {
	m, cri, rec := newEventsManager(t)
	cri.images["img:1"] = true
	cri.execErr = errors.New("exit status 1")
	pod := simplePod("ps", "img:1")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	m.SyncPod(context.Background(), pod, nil, nil)
	checkEvents(t, rec, pod,
		want{normal, "Pulled", `Container image "img:1" already present on machine`, "c0"},
		want{normal, "Created", "Container created", "c0"},
		want{normal, "Started", "Container started", "c0"},
		want{warning, "FailedPostStartHook", "PostStartHook failed", "c0"},
		want{normal, "Killing", "FailedPostStartHook", "c0"},
	)

	m, cri, rec = newEventsManager(t)
	cri.images["img:1"] = true
	pod = simplePod("k", "img:1")
	tgps := int64(30)
	pod.Spec.TerminationGracePeriodSeconds = &tgps
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	syncAndStatus(t, m, pod)
	pods, err := m.GetPods(context.Background(), false)
	if err != nil || len(pods) != 1 {
		t.Fatal(pods, err)
	}
	rec.Reset()
	cri.execErr = errors.New("exit status 1")
	if err := m.KillPod(context.Background(), pod, pods[0], nil); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, rec, pod,
		want{normal, "Killing", "Stopping container c0", "c0"},
		want{warning, "FailedPreStopHook", "PreStopHook failed", "c0"},
	)
}

func TestEventsContainerIDReplacedByName(t *testing.T) {
	m, _, rec := newEventsManager(t)
	pod := simplePod("id", "img:1")
	m.containerEvent(pod, "c0", "abc123", warning, "Failed", "Error: container abc123 is gone")
	if e := rec.Events(); len(e) != 1 || e[0].Message != "Error: container c0 is gone" {
		t.Fatalf("events %v", e)
	}
}
