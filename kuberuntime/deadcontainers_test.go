package kuberuntime_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

// deadEnv is a manager on the fake runtime whose clock the test steps
// (past the crash back-off between restarts).
type deadEnv struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	cri *fake.Runtime
	m   *kuberuntime.Manager
}

func newDeadEnv(t *testing.T, ignoreFilters bool) *deadEnv {
	t.Helper()
	r := newRemoveEnvWith(t, ignoreFilters)
	return &deadEnv{t: t, clk: r.clk, cri: r.cri, m: r.m}
}

func deadPod(uid string, names ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "p-" + uid, Namespace: "default"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways}}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

// sync has the manager converge pod once, past any back-off.
func (e *deadEnv) sync(pod *v1.Pod) *kubetypes.PodStatus {
	e.t.Helper()
	e.clk.Step(10 * time.Minute)
	st, err := e.m.GetPodStatus(e.t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.m.SyncPod(e.t.Context(), pod, st, nil).Err(); err != nil {
		e.t.Fatal(err)
	}
	st, err = e.m.GetPodStatus(e.t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// crash ends the running instance of the pod's container name and
// returns its id and log path (with a line written to it).
func (e *deadEnv) crash(st *kubetypes.PodStatus, name string) (id, log string) {
	e.t.Helper()
	cs := st.FindContainerStatusByName(name)
	if cs == nil || cs.State != kubetypes.ContainerStateRunning {
		e.t.Fatalf("%s: no running instance: %+v", name, cs)
	}
	if err := e.cri.AppendLog(cs.ID, runtimeapi.Stdout, "crashing\n"); err != nil {
		e.t.Fatal(err)
	}
	e.clk.Step(time.Second)
	if err := e.cri.ExitContainer(cs.ID, 1, "Error"); err != nil {
		e.t.Fatal(err)
	}
	return cs.ID, cs.LogPath
}

// instances returns the pod's instances of name in the runtime, newest
// first, as "state/restartCount" strings, and their ids.
func (e *deadEnv) instances(pod *v1.Pod, name string) (states []string, ids []string) {
	e.t.Helper()
	st, err := e.m.GetPodStatus(e.t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name {
			states = append(states, string(cs.State)+"/"+strconv.Itoa(cs.RestartCount))
			ids = append(ids, cs.ID)
		}
	}
	return states, ids
}

// A crash-looping container's older dead instances go at its next death
// and the newest stays, with its log; its next instance still gets the
// right restart count; the pod's other containers (one running, one with
// two dead instances), and another pod's dead instances, are untouched.
func TestRemoveDeadContainersKeepsNewest(t *testing.T) {
	e := newDeadEnv(t, false)
	pod := deadPod("p", "crash", "steady", "side")
	other := deadPod("o", "crash")
	st, ost := e.sync(pod), e.sync(other)
	var logs []string
	for i := range 3 {
		if i == 0 {
			e.crash(st, "side")
		}
		_, log := e.crash(st, "crash")
		logs = append(logs, log)
		e.crash(ost, "crash")
		st, ost = e.sync(pod), e.sync(other)
	}
	// The fourth death: instances 3 (just dead), 2, 1, 0.
	e.crash(st, "side")
	id, log := e.crash(st, "crash")
	logs = append(logs, log)
	if got, _ := e.instances(pod, "crash"); !slices.Equal(got, []string{"exited/3", "exited/2", "exited/1", "exited/0"}) {
		t.Fatalf("before: %v", got)
	}
	for _, l := range logs {
		if _, err := os.Stat(l); err != nil {
			t.Fatalf("log before removal: %v", err)
		}
	}

	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, 1); err != nil {
		t.Fatal(err)
	}
	got, ids := e.instances(pod, "crash")
	if !slices.Equal(got, []string{"exited/3"}) || ids[0] != id {
		t.Fatalf("after: %v %v, want only the newest (%s)", got, ids, id)
	}
	if _, err := os.Stat(log); err != nil {
		t.Fatalf("the kept instance's log: %v", err)
	}
	for _, l := range logs[:3] {
		if _, err := os.Stat(l); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a removed instance's log %s: %v", l, err)
		}
	}
	if got, _ := e.instances(pod, "steady"); !slices.Equal(got, []string{"running/0"}) {
		t.Fatalf("the pod's other container: %v", got)
	}
	if got, _ := e.instances(pod, "side"); !slices.Equal(got, []string{"exited/1", "exited/0"}) {
		t.Fatalf("the pod's container of another name: %v", got)
	}
	if got, _ := e.instances(other, "crash"); !slices.Equal(got, []string{"running/3", "exited/2", "exited/1", "exited/0"}) {
		t.Fatalf("the other pod: %v", got)
	}

	// The restart goes on from the kept instance's count.
	e.sync(pod)
	if got, _ := e.instances(pod, "crash"); !slices.Equal(got, []string{"running/4", "exited/3"}) {
		t.Fatalf("after the restart: %v", got)
	}
	// Again with a running instance: nothing more to remove.
	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.instances(pod, "crash"); !slices.Equal(got, []string{"running/4", "exited/3"}) {
		t.Fatalf("a second call: %v", got)
	}
}

// keep 0 with no container id removes every exited instance of every
// name, and leaves the running and created ones.
func TestRemoveDeadContainersAll(t *testing.T) {
	e := newDeadEnv(t, false)
	pod := deadPod("p", "a", "b", "c")
	st := e.sync(pod)
	e.crash(st, "a")
	e.crash(st, "b")
	// b's next instance is created but cannot start.
	e.cri.InjectError("StartContainer", errors.New("no"), -1)
	e.clk.Step(10 * time.Minute)
	st, err := e.m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	_ = e.m.SyncPod(t.Context(), pod, st, nil)
	e.cri.ClearFaults()
	if a, _ := e.instances(pod, "a"); !slices.Equal(a, []string{"created/1", "exited/0"}) {
		t.Fatalf("a before: %v", a)
	}

	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, "", 0); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{"a": {"created/1"}, "b": {"created/1"}, "c": {"running/0"}} {
		if got, _ := e.instances(pod, name); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// A container id of another pod, or one the runtime no longer lists,
// removes nothing, even from a runtime that ignores the label selector.
func TestRemoveDeadContainersOnlyThePods(t *testing.T) {
	e := newDeadEnv(t, true)
	pod, other := deadPod("p", "a"), deadPod("o", "a")
	st, ost := e.sync(pod), e.sync(other)
	e.crash(st, "a")
	oid, _ := e.crash(ost, "a")
	st, ost = e.sync(pod), e.sync(other)
	e.crash(st, "a")
	e.crash(ost, "a")
	for _, id := range []string{oid, "no-such-container"} {
		if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*v1.Pod{pod, other} {
		if got, _ := e.instances(p, "a"); !slices.Equal(got, []string{"exited/1", "exited/0"}) {
			t.Fatalf("%s: %v", p.UID, got)
		}
	}
	// The pod's own removal leaves the other pod's instances.
	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, "", 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.instances(pod, "a"); len(got) != 0 {
		t.Fatalf("pod: %v, want none", got)
	}
	if got, _ := e.instances(other, "a"); !slices.Equal(got, []string{"exited/1", "exited/0"}) {
		t.Fatalf("other pod: %v", got)
	}
}

// A failed removal is returned (ErrRemoveContainer wrapping the runtime's
// error) and does not stop the others; a negative keep is refused.
func TestRemoveDeadContainersFailure(t *testing.T) {
	e := newDeadEnv(t, false)
	pod := deadPod("p", "a")
	st := e.sync(pod)
	for range 2 {
		e.crash(st, "a")
		st = e.sync(pod)
	}
	id, _ := e.crash(st, "a")
	boom := errors.New("disk on fire")
	e.cri.InjectError("RemoveContainer", boom, 1)
	err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, 1)
	if !errors.Is(err, kuberuntime.ErrRemoveContainer) || !errors.Is(err, boom) {
		t.Fatalf("error %v, want ErrRemoveContainer wrapping the runtime's", err)
	}
	if got, _ := e.instances(pod, "a"); len(got) != 2 || got[0] != "exited/2" {
		t.Fatalf("after one failed removal of two: %v", got)
	}
	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, -1); !errors.Is(err, kuberuntime.ErrInvalidArgument) {
		t.Fatalf("keep -1: %v, want ErrInvalidArgument", err)
	}
	if err := e.m.RemoveDeadContainers(t.Context(), pod.UID, id, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.instances(pod, "a"); !slices.Equal(got, []string{"exited/2"}) {
		t.Fatalf("retry: %v", got)
	}
}

// sameCreated is a runtime that lists every container as created at the
// same instant.
type sameCreated struct{ *fake.Runtime }

func (r sameCreated) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	cs, err := r.Runtime.ListContainers(ctx, f)
	for _, c := range cs {
		c.CreatedAt = 1
	}
	return cs, err
}

// Instances created at the same instant are told apart by their attempt:
// the one with the higher restart count is the newer and stays (not the
// one with the lowest id).
func TestRemoveDeadContainersSameCreationTime(t *testing.T) {
	e := newDeadEnv(t, false)
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: sameCreated{e.cri}, Images: e.cri, Clock: e.clk, PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := deadPod("p", "a")
	st := e.sync(pod)
	// At least two older instances, and the newest not the lowest id.
	ids := []string{st.FindContainerStatusByName("a").ID}
	for len(ids) < 3 || slices.Min(ids) == ids[len(ids)-1] {
		if len(ids) == 10 {
			t.Fatal("the newest instance's id is always the lowest")
		}
		e.crash(st, "a")
		st = e.sync(pod)
		ids = append(ids, st.FindContainerStatusByName("a").ID)
	}
	id, _ := e.crash(st, "a")
	if err := m.RemoveDeadContainers(t.Context(), pod.UID, id, 1); err != nil {
		t.Fatal(err)
	}
	if got, kept := e.instances(pod, "a"); len(got) != 1 || kept[0] != id {
		t.Fatalf("kept %v %v, want the newest attempt %s (of %v)", got, kept, id, ids)
	}
}
