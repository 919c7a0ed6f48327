package kuberuntime_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

type removeEnv struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	cri *fake.Runtime
	m   *kuberuntime.Manager
}

// unfiltered is a runtime that ignores list filters: it lists every
// container and sandbox whatever the caller asks for.
type unfiltered struct{ *fake.Runtime }

func (u unfiltered) ListContainers(ctx context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return u.Runtime.ListContainers(ctx, nil)
}

func (u unfiltered) ListPodSandbox(ctx context.Context, _ *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return u.Runtime.ListPodSandbox(ctx, nil)
}

func newRemoveEnv(t *testing.T) *removeEnv { return newRemoveEnvWith(t, false) }

// newRemoveEnvWith builds the manager on the fake runtime, seen through
// unfiltered when ignoreFilters.
func newRemoveEnvWith(t *testing.T, ignoreFilters bool) *removeEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	cri, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var rt kuberuntime.RuntimeService = cri
	if ignoreFilters {
		rt = unfiltered{cri}
	}
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: cri, Clock: clk, PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &removeEnv{t: t, clk: clk, cri: cri, m: m}
}

// run starts a pod with the named containers and returns it.
func (e *removeEnv) run(uid string, names ...string) *v1.Pod {
	e.t.Helper()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "p-" + uid, Namespace: "default"}}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	st, err := e.m.GetPodStatus(e.t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.m.SyncPod(e.t.Context(), pod, st, nil).Err(); err != nil {
		e.t.Fatal(err)
	}
	return pod
}

// kill ends every container of pod and stops its sandbox.
func (e *removeEnv) kill(pod *v1.Pod) {
	e.t.Helper()
	sel := map[string]string{kuberuntime.LabelPodUID: string(pod.UID)}
	cs, err := e.cri.ListContainers(e.t.Context(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range cs {
		if err := e.cri.ExitContainer(c.GetId(), 0, ""); err != nil {
			e.t.Fatal(err)
		}
	}
	sbs, err := e.cri.ListPodSandbox(e.t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, sb := range sbs {
		if err := e.cri.StopPodSandbox(e.t.Context(), sb.GetId()); err != nil {
			e.t.Fatal(err)
		}
	}
}

// count returns how many containers and sandboxes of uid the runtime holds.
func (e *removeEnv) count(uid types.UID) (containers, sandboxes int) {
	e.t.Helper()
	sel := map[string]string{kuberuntime.LabelPodUID: string(uid)}
	cs, err := e.cri.ListContainers(e.t.Context(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	sbs, err := e.cri.ListPodSandbox(e.t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(cs), len(sbs)
}

func (e *removeEnv) logPath(uid types.UID) string {
	e.t.Helper()
	cs, err := e.cri.ListContainers(e.t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kuberuntime.LabelPodUID: string(uid)}})
	if err != nil || len(cs) == 0 {
		e.t.Fatalf("containers of %s: %d, %v", uid, len(cs), err)
	}
	st, err := e.cri.ContainerStatus(e.t.Context(), cs[0].GetId(), false)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.cri.AppendLog(cs[0].GetId(), runtimeapi.Stdout, "last words\n"); err != nil {
		e.t.Fatal(err)
	}
	return st.GetStatus().GetLogPath()
}

// RemovePodContent removes a stopped pod's dead containers, their logs and
// its sandbox, and nothing of a running pod or of another pod.
func TestRemovePodContent(t *testing.T) {
	e := newRemoveEnv(t)
	gone := e.run("gone", "a", "b")
	stays := e.run("stays", "a")
	log := e.logPath(gone.UID)
	if _, err := os.Stat(log); err != nil {
		t.Fatal(err)
	}

	// Running: nothing to remove.
	if err := e.m.RemovePodContent(t.Context(), gone.UID); err != nil {
		t.Fatal(err)
	}
	if c, s := e.count(gone.UID); c != 2 || s != 1 {
		t.Fatalf("running pod: %d containers, %d sandboxes left, want 2 and 1", c, s)
	}

	e.kill(gone)
	if err := e.m.RemovePodContent(t.Context(), gone.UID); err != nil {
		t.Fatal(err)
	}
	if c, s := e.count(gone.UID); c != 0 || s != 0 {
		t.Fatalf("stopped pod: %d containers, %d sandboxes left, want none", c, s)
	}
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log of a removed container: %v", err)
	}
	if c, s := e.count(stays.UID); c != 1 || s != 1 {
		t.Fatalf("other pod: %d containers, %d sandboxes, want 1 and 1", c, s)
	}
	// Again: nothing left, no error.
	if err := e.m.RemovePodContent(t.Context(), gone.UID); err != nil {
		t.Fatal(err)
	}
}

// A container that cannot be removed keeps its sandbox, the error names
// it, and a later call removes both.
func TestRemovePodContentFailure(t *testing.T) {
	e := newRemoveEnv(t)
	pod := e.run("p", "a")
	e.kill(pod)
	boom := errors.New("disk on fire")
	e.cri.InjectError("RemoveContainer", boom, 1)
	err := e.m.RemovePodContent(t.Context(), pod.UID)
	if !errors.Is(err, kuberuntime.ErrRemoveContainer) || !errors.Is(err, boom) {
		t.Fatalf("error %v, want ErrRemoveContainer wrapping the runtime's", err)
	}
	if c, s := e.count(pod.UID); c != 1 || s != 1 {
		t.Fatalf("after a failed removal: %d containers, %d sandboxes, want 1 and 1", c, s)
	}
	if err := e.m.RemovePodContent(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if c, s := e.count(pod.UID); c != 0 || s != 0 {
		t.Fatalf("retry: %d containers, %d sandboxes left", c, s)
	}

	// A failing list is an error naming the pod.
	e.cri.InjectError("ListContainers", boom, 1)
	if err := e.m.RemovePodContent(t.Context(), pod.UID); !errors.Is(err, boom) {
		t.Fatalf("list failure: %v", err)
	}
}

// A runtime that ignores the label selector still loses only the pod's
// own objects, and a container of another agent (no pod labels) in the
// pod's stopped sandbox keeps the sandbox, as in GarbageCollect.
func TestRemovePodContentOnlyThePods(t *testing.T) {
	for _, ignoreFilters := range []bool{false, true} {
		e := newRemoveEnvWith(t, ignoreFilters)
		gone, other := e.run("gone", "a"), e.run("other", "a")
		e.kill(gone)
		e.kill(other)
		if err := e.m.RemovePodContent(t.Context(), gone.UID); err != nil {
			t.Fatal(err)
		}
		if c, s := e.count(gone.UID); c != 0 || s != 0 {
			t.Fatalf("ignoreFilters=%v: the pod kept %d containers, %d sandboxes", ignoreFilters, c, s)
		}
		if c, s := e.count(other.UID); c != 1 || s != 1 {
			t.Fatalf("ignoreFilters=%v: the other stopped pod has %d containers, %d sandboxes left, want 1 and 1", ignoreFilters, c, s)
		}
	}

	e := newRemoveEnv(t)
	pod := e.run("p", "a")
	sbs, err := e.cri.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{kuberuntime.LabelPodUID: "p"}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes: %v %v", sbs, err)
	}
	foreign, err := e.cri.CreateContainer(t.Context(), sbs[0].GetId(), &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "debug"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.kill(pod)
	if err := e.m.RemovePodContent(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if c, s := e.count(pod.UID); c != 0 || s != 1 {
		t.Fatalf("with another agent's container in the sandbox: %d containers, %d sandboxes of the pod, want 0 and 1", c, s)
	}
	if _, err := e.cri.ContainerStatus(t.Context(), foreign, false); err != nil {
		t.Fatalf("the other agent's container: %v", err)
	}
}
