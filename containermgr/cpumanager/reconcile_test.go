package cpumanager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/syncloop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// admitter is the adapter doc.go shows.
type admitter struct{ m *Manager }

func (a admitter) Admit(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
	ok, reason, msg := a.m.Admit(pod, active)
	return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
}

var _ syncloop.AdmitHandler = admitter{}

func TestAdmitThroughSyncLoopInterface(t *testing.T) {
	m := started(t, newStatic(t, mustTopo(t, 1, 2, 1, 1), 1, t.TempDir()))
	var h syncloop.AdmitHandler = admitter{m}
	first := pod("a", true, "1")
	if r := h.Admit(first, nil); !r.Admit {
		t.Fatalf("first pod rejected: %+v", r)
	}
	if got, _ := m.GetCPUSet("a", "c0"); got.String() != "1" {
		t.Errorf("admission allocated %s, want 1", got)
	}
	r := h.Admit(pod("b", true, "1"), []*v1.Pod{first})
	if r.Admit || r.Reason != "UnexpectedAdmissionError" ||
		!strings.Contains(r.Message, "not enough cpus available to satisfy request: requested=1, available=0") {
		t.Errorf("second pod: %+v", r)
	}
	// All or nothing: a pod whose second container does not fit keeps
	// nothing of the first.
	m2 := started(t, newStatic(t, mustTopo(t, 1, 4, 1, 1), 1, t.TempDir()))
	if ok, _, _ := m2.Admit(pod("c", true, "2", "2"), nil); ok {
		t.Fatal("4 cpus admitted on 3 free")
	}
	if m2.DefaultCPUSet().String() != "0-3" || len(m2.st.entries) != 0 {
		t.Errorf("rejected pod left state: pool %s, %d pods", m2.DefaultCPUSet(), len(m2.st.entries))
	}
	// Best-effort pods are admitted and pinned to the shared pool.
	be := pod("be", false, "")
	if r := h.Admit(be, nil); !r.Admit {
		t.Errorf("best effort rejected: %+v", r)
	}
	if s, ok := m.ContainerCPUSet(be, &be.Spec.Containers[0]); !ok || s != "0" {
		t.Errorf("best effort cpuset %q %v, want the pool 0", s, ok)
	}
	if s, ok := m.ContainerCPUSet(first, &first.Spec.Containers[0]); !ok || s != "1" {
		t.Errorf("guaranteed cpuset %q %v, want 1", s, ok)
	}
}

func TestReconcile(t *testing.T) {
	cri := &fakeCRI{}
	ready := false
	a, b := pod("a", true, "2"), pod("b", false, "1")
	active := []*v1.Pod{a, b}
	m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 1, 1), NumReservedCPUs: 1,
		StateDir: t.TempDir(), Runtime: cri, SourcesReady: func() bool { return ready }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), func() []*v1.Pod { return active }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{a, b, pod("gone", true, "1")} {
		if err := m.AllocatePod(p); err != nil {
			t.Fatal(err)
		}
	}
	cri.add("ca", "a", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
	cri.add("cb", "b", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
	cri.add("cx", "a", "c0", runtimeapi.ContainerState_CONTAINER_EXITED)
	cri.add("cg", "gone", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
	cri.add("cs", "stranger", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
	cri.ctrs = append(cri.ctrs, &runtimeapi.Container{Id: "nolabels", State: runtimeapi.ContainerState_CONTAINER_RUNNING})

	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, calls := cri.snapshot()
	// a: cpus 1-2; gone: cpu 3; b: the pool 0. Sources not ready: "gone"
	// keeps its cpu; inactive pods' containers are left alone.
	if got["ca"] != "1-2" || got["cb"] != "0" || len(got) != 2 || calls != 2 {
		t.Errorf("updates %v (%d calls)", got, calls)
	}
	if _, ok := m.GetCPUSet("gone", "c0"); !ok {
		t.Error("stale assignment purged before the sources were ready")
	}
	// Nothing changed: nothing is sent again.
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, calls2 := cri.snapshot(); calls2 != calls {
		t.Errorf("unchanged cpusets re-sent: %d calls, was %d", calls2, calls)
	}
	// Sources ready: "gone" is purged, its cpu returns to the pool, and b
	// is told its larger pool.
	ready = true
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.GetCPUSet("gone", "c0"); ok {
		t.Error("stale assignment kept after the sources were ready")
	}
	if got, _ := cri.snapshot(); got["cb"] != "0,3" {
		t.Errorf("b's cpuset %q after the purge, want 0,3", got["cb"])
	}
	// A list error is returned.
	cri.listErr = errors.New("boom")
	if err := m.Reconcile(t.Context()); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Reconcile = %v", err)
	}
}

func TestRunReconcilesEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cri := &fakeCRI{}
		fc := clocktesting.NewFakeClock(time.Unix(1e9, 0))
		m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 2, 1, 1), NumReservedCPUs: 1,
			StateDir: t.TempDir(), Runtime: cri, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if _, calls := cri.snapshot(); calls != 0 {
			t.Fatalf("%d updates with no containers", calls)
		}
		cri.add("c1", "p", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
		fc.Step(DefaultReconcilePeriod - time.Second)
		synctest.Wait()
		if _, calls := cri.snapshot(); calls != 0 {
			t.Fatal("reconciled before the period")
		}
		fc.Step(time.Second)
		synctest.Wait()
		if got, _ := cri.snapshot(); got["c1"] != "0-1" {
			t.Errorf("after one period: %v", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// The manager plugs into the runtime as its cpuset provider, and the
// remote CRI client is a Runtime.
var (
	_ kuberuntime.CPUSetProvider = (*Manager)(nil)
	_ Runtime                    = (*remote.Client)(nil)
)

// A request for more CPUs than the allocator looks at is refused with the
// figure asked for, not the bound (issue 23, item 8).
func TestHugeCPURequestReportsRealFigure(t *testing.T) {
	m := started(t, newStatic(t, mustTopo(t, 1, 2, 1, 1), 1, t.TempDir()))
	var h syncloop.AdmitHandler = admitter{m}
	r := h.Admit(pod("a", true, "20000000"), nil)
	if r.Admit || !strings.Contains(r.Message, "requested=20000000,") {
		t.Fatalf("admission: %+v, want a refusal saying requested=20000000", r)
	}
}
