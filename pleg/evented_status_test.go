package pleg

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// eventStatusStub is a stubRuntime that also builds statuses from events
// (a stand-in for kuberuntime.Manager.PodStatusFromEvent).
type eventStatusStub struct {
	*stubRuntime
	fromEvent int
}

func (s *eventStatusStub) PodStatusFromEvent(ev *runtimeapi.ContainerEventResponse) (*kubetypes.PodStatus, bool) {
	s.fromEvent++
	md := ev.GetPodSandboxStatus().GetMetadata()
	if md == nil || len(ev.GetContainersStatuses()) == 0 {
		return nil, false
	}
	st := &kubetypes.PodStatus{ID: types.UID(md.GetUid()), Name: md.GetName(), Namespace: md.GetNamespace(),
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{ev.GetPodSandboxStatus()}}
	for _, cs := range ev.GetContainersStatuses() {
		state := kubetypes.ContainerStateRunning
		if cs.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			state = kubetypes.ContainerStateExited
		}
		st.ContainerStatuses = append(st.ContainerStatuses, &kubetypes.ContainerStatus{ID: cs.GetId(), State: state, ExitCode: cs.GetExitCode()})
	}
	return st, true
}

// TestEventedStatusFromEvent: a container event's own statuses stand for a
// read of the pod (no GetPodStatus) only when they can hold all of it: a
// container's start or stop in the only sandbox the cache knows for the
// pod, with no pod worker changing the pod within EventDeliveryMargin
// before the event. Every other case reads the pod.
func TestEventedStatusFromEvent(t *testing.T) {
	sb := func(id string) *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{Id: id, State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Uid: "p", Name: "p", Namespace: "ns"}}
	}
	exitedC1 := []*runtimeapi.ContainerStatus{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 3}}
	evAt := epoch.Add(10 * time.Second)
	stop := func(id string, statuses []*runtimeapi.ContainerStatus) *runtimeapi.ContainerEventResponse {
		return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
			CreatedAt: evAt.UnixNano(), PodSandboxStatus: sb("s1"), ContainersStatuses: statuses}
	}
	cachedOne := &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb("s1")},
		ContainerStatuses: []*kubetypes.ContainerStatus{{ID: "c1", State: kubetypes.ContainerStateRunning}}}
	for _, tc := range []struct {
		name      string
		plain     bool                 // the runtime cannot build statuses from events
		cached    *kubetypes.PodStatus // nil: no record
		ev        *runtimeapi.ContainerEventResponse
		prepare   func(e *EventedPLEG, fc *clocktesting.FakeClock)
		wantEvent bool // the event's statuses used, no GetPodStatus
	}{
		{name: "exit of a settled pod", cached: cachedOne, ev: stop("c1", exitedC1), wantEvent: true},
		{name: "worker changed it long before", cached: cachedOne, ev: stop("c1", exitedC1), wantEvent: true,
			prepare: func(e *EventedPLEG, fc *clocktesting.FakeClock) {
				fc.SetTime(evAt.Add(-EventDeliveryMargin - time.Millisecond))
				e.HoldPod("p")
				e.ReleasePod("p")
			}},
		{name: "worker changing it", cached: cachedOne, ev: stop("c1", exitedC1),
			prepare: func(e *EventedPLEG, _ *clocktesting.FakeClock) { e.HoldPod("p") }},
		{name: "worker changed it just before", cached: cachedOne, ev: stop("c1", exitedC1),
			prepare: func(e *EventedPLEG, fc *clocktesting.FakeClock) {
				fc.SetTime(evAt.Add(-EventDeliveryMargin))
				e.HoldPod("p")
				e.ReleasePod("p")
			}},
		{name: "runtime without PodStatusFromEvent", plain: true, cached: cachedOne, ev: stop("c1", exitedC1)},
		{name: "pod not cached", ev: stop("c1", exitedC1)},
		{name: "two sandboxes cached", ev: stop("c1", exitedC1), cached: &kubetypes.PodStatus{ID: "p",
			SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb("s1"), sb("s0")}}},
		{name: "another sandbox cached", ev: stop("c1", exitedC1), cached: &kubetypes.PodStatus{ID: "p",
			SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb("s0")}}},
		{name: "no container statuses", cached: cachedOne, ev: stop("c1", nil)},
		{name: "the event's container missing", cached: cachedOne, ev: stop("c1", []*runtimeapi.ContainerStatus{{Id: "c2"}})},
		{name: "the sandbox's own event", cached: cachedOne, ev: stop("s1", exitedC1)},
		{name: "deletion", cached: cachedOne, ev: &runtimeapi.ContainerEventResponse{ContainerId: "c1",
			ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, CreatedAt: evAt.UnixNano(),
			PodSandboxStatus: sb("s1"), ContainersStatuses: exitedC1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(epoch)
			stub := newStub()
			stub.setStatus("p", &kubetypes.PodStatus{ID: "p", Name: "p", Namespace: "ns", SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb("s1")},
				ContainerStatuses: []*kubetypes.ContainerStatus{{ID: "c1", State: kubetypes.ContainerStateExited, ExitCode: 7}}}, nil)
			rt := &eventStatusStub{stubRuntime: stub}
			var e *EventedPLEG
			if tc.plain {
				e = newEvented(t, stub, &stubEvents{}, fc)
			} else {
				e = newEvented(t, rt, &stubEvents{}, fc)
			}
			e.generic.evented.Store(true) // as Run does
			if tc.cached != nil {
				e.Cache().Set("p", tc.cached, nil, epoch)
			}
			if tc.prepare != nil {
				tc.prepare(e, fc)
			}
			if err := e.HandleEvent(t.Context(), tc.ev); err != nil {
				t.Fatal(err)
			}
			if got := stub.calls("p") == 0; got != tc.wantEvent {
				t.Fatalf("event's statuses used %v (GetPodStatus calls %d), want %v", got, stub.calls("p"), tc.wantEvent)
			}
			st, _ := e.Cache().Get("p")
			var c1 *kubetypes.ContainerStatus
			for _, cs := range st.ContainerStatuses {
				if cs.ID == "c1" {
					c1 = cs
				}
			}
			wantCode := int32(7) // GetPodStatus's
			if tc.wantEvent {
				wantCode = 3
			}
			if c1 == nil || c1.State != kubetypes.ContainerStateExited || c1.ExitCode != wantCode || !st.TimeStamp.Equal(evAt) {
				t.Fatalf("cached %+v (c1 %+v), want c1 exited with %d at %v", st, c1, wantCode, evAt)
			}
			if tc.ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT && tc.ev.GetContainerId() == "c1" {
				expectEvents(t, e.Watch(), "p/ContainerDied/c1")
			}
		})
	}
}

// TestReleaseTimesKeptOnlyWhileEvented: release times are recorded only
// while events feed the cache, and relists drop those older than
// EventDeliveryMargin.
func TestReleaseTimesKeptOnlyWhileEvented(t *testing.T) {
	fc := clocktesting.NewFakeClock(epoch)
	g, err := New(Config{Runtime: newStub(), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	g.HoldPod("a")
	g.ReleasePod("a")
	if g.changedSince("a", epoch.Add(-time.Hour)) || len(g.released) != 0 {
		t.Fatalf("release recorded without events: %v", g.released)
	}
	g.evented.Store(true)
	g.HoldPod("a")
	if !g.changedSince("a", epoch.Add(time.Hour)) {
		t.Fatal("a held pod is not changing")
	}
	g.HoldPod("a") // nested
	g.ReleasePod("a")
	if !g.changedSince("a", epoch.Add(time.Hour)) {
		t.Fatal("still held once: not changing")
	}
	g.ReleasePod("a")
	if !g.changedSince("a", epoch) || g.changedSince("a", epoch.Add(time.Nanosecond)) {
		t.Fatal("release time not kept exactly")
	}
	fc.Step(EventDeliveryMargin)
	if err := g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(g.released) != 1 {
		t.Fatalf("a release at the margin dropped: %v", g.released)
	}
	fc.Step(time.Millisecond)
	if err := g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(g.released) != 0 {
		t.Fatalf("an old release kept: %v", g.released)
	}
}

// TestReleaseTimesMapShrinks: once a relist has dropped every release
// time of a map that grew large, the map's memory is given back (a Go map
// keeps its table when emptied); release times are still kept after.
func TestReleaseTimesMapShrinks(t *testing.T) {
	fc := clocktesting.NewFakeClock(epoch)
	g, err := New(Config{Runtime: newStub(), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	g.evented.Store(true)
	const n = 50_000
	uids := make([]types.UID, n)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprintf("pod-%06d", i))
	}
	liveHeap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := liveHeap()
	for _, uid := range uids {
		g.HoldPod(uid)
		g.ReleasePod(uid)
	}
	full := liveHeap() - base
	if len(g.released) != n || full < 1<<20 {
		t.Fatalf("%d release times taking %d bytes, want %d taking over 1 MiB", len(g.released), full, n)
	}
	fc.Step(EventDeliveryMargin + time.Millisecond)
	if err := g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := liveHeap() - base
	if len(g.released) != 0 {
		t.Fatalf("%d release times kept, want none", len(g.released))
	}
	if after > full/4 {
		t.Errorf("%d bytes still held after every release time was dropped, want the %d-byte map given back", after, full)
	}
	runtime.KeepAlive(uids)
	g.HoldPod("b")
	g.ReleasePod("b")
	if !g.changedSince("b", fc.Now()) {
		t.Error("a release after the shrink is not kept")
	}
}
