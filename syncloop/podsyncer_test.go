package syncloop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podworkers"
)

// ltHooks records the pod hooks in order.
type ltHooks struct {
	mu    sync.Mutex
	calls []string
	fail  string
}

func (h *ltHooks) rec(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, name)
	if h.fail == name {
		return errors.New(name + " failed")
	}
	return nil
}
func (h *ltHooks) WaitForAttachAndMount(context.Context, *v1.Pod) error { return h.rec("mount") }
func (h *ltHooks) WaitForUnmount(context.Context, *v1.Pod) error        { return h.rec("unmount") }
func (h *ltHooks) EnsurePodCgroup(context.Context, *v1.Pod) error       { return h.rec("cgroup") }
func (h *ltHooks) DestroyPodCgroup(context.Context, *v1.Pod) error      { return h.rec("destroy") }
func (h *ltHooks) AddPod(*v1.Pod)                                       { _ = h.rec("probes+") }
func (h *ltHooks) RemovePod(*v1.Pod)                                    { _ = h.rec("probes-") }
func (h *ltHooks) StopLivenessAndStartup(*v1.Pod)                       { _ = h.rec("probes-stop") }

func (h *ltHooks) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func ltEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPodSyncerLifecycleHooks(t *testing.T) {
	h := &ltHooks{}
	l, stub, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), func(c *Config) {
		c.Volumes, c.Cgroups, c.Probes = h, h, h
		c.Root = t.TempDir()
	})
	a, pod := l.podSyncer, ltPod("1", "web", 0)
	ctx := t.Context()
	if term, err := a.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil, nil); term || err != nil {
		t.Fatalf("SyncPod: %v %v", term, err)
	}
	if want := []string{"cgroup", "mount", "probes+"}; !ltEqual(h.got(), want) {
		t.Fatalf("sync hooks %v", h.got())
	}
	if syncs, _, _ := stub.counts(); syncs != 1 {
		t.Fatal("runtime not synced")
	}
	if st, ok := l.StatusManager().GetPodStatus("1"); !ok || st.Phase != v1.PodPending {
		t.Fatalf("status %v %+v", ok, st)
	}

	// A container still running after the kill is an error.
	stub.statuses["1"] = &kubetypes.PodStatus{ID: "1", ContainerStatuses: []*kubetypes.ContainerStatus{{ID: "c", Name: "app", State: kubetypes.ContainerStateRunning}}}
	grace := int64(3)
	if err := a.SyncTerminatingPod(ctx, pod, nil, &grace, nil); !errors.Is(err, ErrPodStillRunning) {
		t.Fatalf("SyncTerminatingPod with a survivor: %v", err)
	}
	delete(stub.statuses, "1")
	h.calls = nil
	err := a.SyncTerminatingPod(ctx, pod, nil, &grace, func(s *v1.PodStatus) {
		s.Phase, s.Reason, s.Message = v1.PodFailed, "Evicted", "node low on memory"
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"probes-stop", "probes-"}; !ltEqual(h.got(), want) {
		t.Fatalf("terminating hooks %v", h.got())
	}
	if st, _ := l.StatusManager().GetPodStatus("1"); st.Phase != v1.PodFailed || st.Reason != "Evicted" {
		t.Fatalf("evicted status %+v", st)
	}
	h.calls = nil
	if err := a.SyncTerminatedPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"unmount", "destroy"}; !ltEqual(h.got(), want) {
		t.Fatalf("terminated hooks %v", h.got())
	}
	h.fail = "unmount"
	if err := a.SyncTerminatedPod(ctx, pod, nil); !errors.Is(err, ErrHook) {
		t.Fatalf("failed unmount: %v", err)
	}
	h.fail = "cgroup"
	if _, err := a.SyncPod(ctx, podworkers.SyncPodSync, ltPod("2", "db", 1), nil, nil); !errors.Is(err, ErrHook) {
		t.Fatalf("failed cgroup: %v", err)
	}
	if err := a.SyncTerminatingRuntimePod(ctx, &kubetypes.Pod{ID: "orphan"}); err != nil || stub.killed("orphan") != 1 {
		t.Fatalf("orphan kill: %v", err)
	}
}

// A pod past its activeDeadlineSeconds becomes Failed/DeadlineExceeded
// and terminal without being synced.
func TestPodSyncerActiveDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	l, stub, _ := ltStubLoop(t, clk, nil)
	pod := ltPod("1", "web", 0)
	d := int64(10)
	pod.Spec.ActiveDeadlineSeconds = &d
	start := metav1.NewTime(ltEpoch)
	pod.Status.StartTime = &start
	if term, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil); term || err != nil {
		t.Fatalf("before the deadline: %v %v", term, err)
	}
	clk.Step(10 * time.Second)
	if term, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodSync, pod, nil, nil); !term || err != nil {
		t.Fatalf("past the deadline: %v %v", term, err)
	}
	st, _ := l.StatusManager().GetPodStatus("1")
	if st.Phase != v1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Fatalf("status %+v", st)
	}
	if syncs, _, _ := stub.counts(); syncs != 1 {
		t.Fatalf("runtime synced %d times", syncs)
	}
}

// After a sync that changed the pod, the agent reads its status once and
// hands that read (stamped with when it began) to the PLEG instead of
// asking it to read the pod again; without that capability it asks.
func TestPodSyncerHandsPostSyncReadToPLEG(t *testing.T) {
	var mu sync.Mutex
	var observed []*kubetypes.PodStatus
	var relists, order []string
	clk := clocktesting.NewFakeClock(ltEpoch)
	var stub *ltStub
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) {
		c.Root = t.TempDir()
		p := &ltObservingPLEG{}
		c.PLEG = p
		p.observe = func(uid types.UID, st *kubetypes.PodStatus) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, st)
		}
		p.relist = func(uid types.UID) {
			mu.Lock()
			defer mu.Unlock()
			relists = append(relists, string(uid))
		}
		// The pod is held in the PLEG while the runtime changes it, and
		// released before the read handed over.
		p.hold = func(uid types.UID) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("hold %s after %d syncs, %d observed", uid, len(stub.syncs), len(observed)))
		}
		p.release = func(uid types.UID) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("release %s after %d syncs, %d observed", uid, len(stub.syncs), len(observed)))
		}
	})
	stub.started = true
	pod := ltPod("1", "web", 0)
	if _, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(observed) != 1 || observed[0].ID != "1" || !observed[0].TimeStamp.Equal(clk.Now()) || len(relists) != 0 {
		t.Fatalf("observed %+v, relists %v: want the one post-sync read, stamped, and no relist request", observed, relists)
	}
	if want := []string{"hold 1 after 0 syncs, 0 observed", "release 1 after 1 syncs, 0 observed"}; !slices.Equal(order, want) {
		t.Fatalf("PLEG calls %q, want %q", order, want)
	}
	mu.Unlock()

	// A sync that did nothing hands nothing over and asks for nothing.
	stub.started = false
	if _, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodSync, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(observed) != 1 || len(relists) != 0 {
		t.Fatalf("a no-op sync: observed %d, relists %v", len(observed), relists)
	}
	mu.Unlock()

	// A PLEG without ObservePodStatus is asked to relist the pod.
	l2, stub2, _ := ltStubLoop(t, clk, func(c *Config) {
		c.Root = t.TempDir()
		c.PLEG = ltPLEG{relist: func(uid types.UID) {
			mu.Lock()
			defer mu.Unlock()
			relists = append(relists, string(uid))
		}}
	})
	stub2.started = true
	if _, err := l2.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(relists) != 1 || relists[0] != "1" {
		t.Fatalf("relists %v, want [1]", relists)
	}
}

// afterSyncStub is an ltStub that can read a pod after its sync from what
// the sync knew (as *kuberuntime.Manager can).
type afterSyncStub struct {
	*ltStub
	before []*kubetypes.PodStatus
	res    []kubetypes.SyncResult
}

func (a *afterSyncStub) GetPodStatusAfterSync(_ context.Context, pod *v1.Pod, before *kubetypes.PodStatus, res kubetypes.SyncResult) (*kubetypes.PodStatus, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.before, a.res = append(a.before, before), append(a.res, res)
	return &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil
}

// After a sync that changed the pod, a runtime that can read the pod from
// what the sync knew is given the status the sync used and its result; a
// kill's read lists the pod (GetPodStatus).
func TestPodSyncerReadsAfterSyncFromWhatTheSyncKnew(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	var rt *afterSyncStub
	var observed int
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) {
		c.Root = t.TempDir()
		rt = &afterSyncStub{ltStub: c.Runtime.(*ltStub)}
		c.Runtime = rt
		c.PLEG = &ltObservingPLEG{observe: func(types.UID, *kubetypes.PodStatus) { observed++ }}
	})
	stub.started = true
	pod := ltPod("1", "web", 0)
	used := &kubetypes.PodStatus{ID: "1", TimeStamp: ltEpoch.Add(-time.Second)}
	if _, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, used); err != nil {
		t.Fatal(err)
	}
	if len(rt.before) != 1 || rt.before[0] != used || len(rt.res[0].Steps) != 1 || observed != 1 {
		t.Fatalf("read after sync given %v and %+v, %d handed over; want the status the sync used and its one step, handed over", rt.before, rt.res, observed)
	}
	if err := l.podSyncer.SyncTerminatingPod(t.Context(), pod, used, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(rt.before) != 1 || observed != 2 {
		t.Fatalf("the read after a kill went through GetPodStatusAfterSync (%d reads) or was not handed over (%d)", len(rt.before), observed)
	}
}

// The agent tells its pod worker from when a status serves the next sync:
// after a sync that changed the runtime, from the end of that change (so a
// read handed over after it counts); after one that changed nothing, from
// the status it used (so an exit applied while it ran counts too).
func TestPodSyncerMarksRuntimeSynced(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) { c.Root = t.TempDir() })
	pod := ltPod("1", "web", 0)
	used := &kubetypes.PodStatus{ID: "1", TimeStamp: ltEpoch.Add(-time.Minute)}

	ctx, mark := podworkers.RecordRuntimeSynced(t.Context())
	if _, err := l.podSyncer.SyncPod(ctx, podworkers.SyncPodSync, pod, nil, used); err != nil {
		t.Fatal(err)
	}
	if !mark().Equal(used.TimeStamp) {
		t.Fatalf("no-op sync marked %v, want the status's %v", mark(), used.TimeStamp)
	}

	stub.started = true
	ctx, mark = podworkers.RecordRuntimeSynced(t.Context())
	if _, err := l.podSyncer.SyncPod(ctx, podworkers.SyncPodSync, pod, nil, used); err != nil {
		t.Fatal(err)
	}
	if !mark().Equal(clk.Now()) {
		t.Fatalf("sync that started a container marked %v, want the end of the change %v", mark(), clk.Now())
	}
}
