package pleg

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

var (
	finished = epoch.Add(-time.Second)
	errBoom  = errors.New("boom")
)

// cachedContainer returns the cached status of container id of pod uid.
func cachedContainer(t *testing.T, g *GenericPLEG, uid, id string) *kubetypes.ContainerStatus {
	t.Helper()
	st, err := g.Cache().Get(types.UID(uid))
	if err != nil {
		t.Fatalf("cache of %s: %v", uid, err)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.ID == id {
			return cs
		}
	}
	t.Fatalf("cache of %s has no container %s: %+v", uid, id, st.ContainerStatuses)
	return nil
}

func expectExited(t *testing.T, g *GenericPLEG, uid, id string, code int32, reason string) {
	t.Helper()
	cs := cachedContainer(t, g, uid, id)
	if cs.State != exited || cs.ExitCode != code || !cs.FinishedAt.Equal(finished) || cs.Reason != reason {
		t.Fatalf("cached %s: state %v code %d finished %v reason %q; want exited %d %v %q",
			id, cs.State, cs.ExitCode, cs.FinishedAt, cs.Reason, code, finished, reason)
	}
}

func expectRunning(t *testing.T, g *GenericPLEG, uid, id string) {
	t.Helper()
	if cs := cachedContainer(t, g, uid, id); cs.State != running {
		t.Fatalf("cached %s: state %v, want running", id, cs.State)
	}
}

func kicked(g *GenericPLEG) bool {
	select {
	case <-g.kick:
		return true
	default:
		return false
	}
}

// An exit event marks the container exited in the cache and sends
// ContainerDied at once; relists and reinspections that still see it
// running (the CRI lags) neither undo it nor send anything; once the CRI
// lists it exited the override goes, again silently.
func TestContainerExitedAheadOfTheCRI(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(pod("p1", ctr("c1", running), ctr("c2", running)))
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerStarted/c1", "p1/ContainerStarted/c2")
	calls := f.rt.calls("p1")

	f.clock.Step(time.Millisecond)
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 3, FinishedAt: finished})
	expectEvents(t, ch, "p1/ContainerDied/c1")
	expectExited(t, f.g, "p1", "c1", 3, ReasonError)
	expectRunning(t, f.g, "p1", "c2")
	if f.rt.calls("p1") != calls {
		t.Fatal("ContainerExited asked the runtime")
	}
	if f.g.PendingExits() != 1 {
		t.Fatalf("pending exits %d, want 1", f.g.PendingExits())
	}

	// A duplicate changes nothing.
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 3, FinishedAt: finished})
	expectEvents(t, ch)

	// The CRI still lists c1 running.
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)
	expectExited(t, f.g, "p1", "c1", 3, ReasonError)

	// A reinspection reads the status, still running: the exit is applied.
	f.g.RequestReinspect("p1")
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch, "p1/PodSync")
	expectExited(t, f.g, "p1", "c1", 3, ReasonError)
	expectRunning(t, f.g, "p1", "c2")
	if f.g.PendingExits() != 1 {
		t.Fatal("the override went while the CRI still lists the container running")
	}

	// The CRI catches up: nothing is sent, the override goes.
	f.rt.setPods(pod("p1", ctr("c1", exited), ctr("c2", running)))
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)
	if f.g.PendingExits() != 0 {
		t.Fatalf("pending exits %d after the CRI caught up, want 0", f.g.PendingExits())
	}
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)

	// Removal: only ContainerRemoved.
	f.rt.setPods(pod("p1", ctr("c2", running)))
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerRemoved/c1")
}

func TestContainerExitedReasons(t *testing.T) {
	for _, tc := range []struct {
		x      ContainerExit
		reason string
	}{
		{ContainerExit{ID: "c1", ExitCode: 0, FinishedAt: finished}, ReasonCompleted},
		{ContainerExit{ID: "c1", ExitCode: 1, FinishedAt: finished}, ReasonError},
		{ContainerExit{ID: "c1", ExitCode: 137, FinishedAt: finished, OOMKilled: true}, ReasonOOMKilled},
	} {
		f := newFixture(t, nil)
		f.rt.setPods(pod("p1", ctr("c1", running)))
		f.relist(t)
		drain(f.g.Watch())
		f.g.ContainerExited(t.Context(), tc.x)
		expectEvents(t, f.g.Watch(), "p1/ContainerDied/c1")
		expectExited(t, f.g, "p1", "c1", tc.x.ExitCode, tc.reason)
	}
}

// The relist saw the exit first: the event changes nothing.
func TestContainerExitedAlreadyListed(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(pod("p1", ctr("c1", exited)))
	f.relist(t)
	drain(f.g.Watch())
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 9, FinishedAt: finished})
	expectEvents(t, f.g.Watch())
	if f.g.PendingExits() != 0 {
		t.Fatal("an exit already listed was kept")
	}
}

// A container that started and died between two relists: the event
// relists at once, and the container counts as exited when it is listed
// running.
func TestContainerExitedNotListedYet(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(pod("p1", ctr("c1", running)))
	f.relist(t)
	drain(ch)

	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c2", ExitCode: 1, FinishedAt: finished})
	expectEvents(t, ch)
	if !kicked(f.g) {
		t.Fatal("no relist requested for an unknown container")
	}
	f.rt.setPods(pod("p1", ctr("c1", running), ctr("c2", running)))
	f.clock.Step(time.Millisecond)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerDied/c2")
	expectExited(t, f.g, "p1", "c2", 1, ReasonError)
	if f.g.PendingExits() != 1 {
		t.Fatal("the override went while the CRI lists the container running")
	}
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)

	// An exit of something no listing shows is forgotten after a relist.
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "stranger", FinishedAt: finished})
	f.relist(t)
	expectEvents(t, ch)
	if f.g.PendingExits() != 1 {
		t.Fatalf("pending exits %d, want 1 (c2 only)", f.g.PendingExits())
	}
}

// The same, when the pod's own on-demand relist (RelistPod: a pod worker
// just started the container) comes before the global one: the exit still
// counts while the CRI lists the container running, and the global relist
// that follows reports nothing new.
func TestContainerExitedNotListedYetRelistPodFirst(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.relist(t) // nothing yet

	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 137, FinishedAt: finished, OOMKilled: true})
	f.rt.setPods(pod("p1", ctr("c1", running)))
	f.clock.Step(time.Millisecond)
	if err := f.g.RelistPod(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, ch, "p1/ContainerDied/c1")
	expectExited(t, f.g, "p1", "c1", 137, ReasonOOMKilled)
	if f.g.PendingExits() != 1 {
		t.Fatal("the override went while the CRI lists the container running")
	}
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)
	expectExited(t, f.g, "p1", "c1", 137, ReasonOOMKilled)
}

// restartPolicy Always: the replacement starts while the CRI still lists
// the old instance running. Only the new one is reported started.
func TestContainerExitedThenRestarted(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(pod("p1", ctr("c1", running)))
	f.relist(t)
	drain(ch)
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 0, FinishedAt: finished})
	expectEvents(t, ch, "p1/ContainerDied/c1")

	f.rt.setPods(pod("p1", ctr("c1", running), ctr("c1b", running)))
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerStarted/c1b")
	expectExited(t, f.g, "p1", "c1", 0, ReasonCompleted)
	expectRunning(t, f.g, "p1", "c1b")

	// The on-demand relist of the pod (after the sync loop's restart) too.
	f.clock.Step(time.Second)
	if err := f.g.RelistPod(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, ch)
	expectExited(t, f.g, "p1", "c1", 0, ReasonCompleted)

	// The CRI catches up; a single pod's relist drops the override.
	f.rt.setPods(pod("p1", ctr("c1", exited), ctr("c1b", running)))
	f.clock.Step(time.Second)
	if err := f.g.RelistPod(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, ch)
	if f.g.PendingExits() != 0 {
		t.Fatalf("pending exits %d, want 0", f.g.PendingExits())
	}
}

// A relist whose status read fails keeps the override: dropping it would
// report the exit again once the read works.
func TestContainerExitedStatusReadFails(t *testing.T) {
	f := newFixture(t, nil)
	ch := f.g.Watch()
	f.rt.setPods(pod("p1", ctr("c1", running)))
	f.relist(t)
	drain(ch)
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "c1", ExitCode: 2, FinishedAt: finished})
	expectEvents(t, ch, "p1/ContainerDied/c1")

	f.rt.setPods(pod("p1", ctr("c1", exited), ctr("c3", running)))
	f.rt.setStatus("p1", nil, errBoom)
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch)
	if f.g.PendingExits() != 1 {
		t.Fatal("override dropped though the pod's events were not applied")
	}
	f.rt.setStatus("p1", nil, nil)
	f.clock.Step(time.Second)
	f.relist(t)
	expectEvents(t, ch, "p1/ContainerStarted/c3")
	if f.g.PendingExits() != 0 {
		t.Fatal("override kept after the CRI caught up")
	}
}

func TestSandboxExitRequestsRelist(t *testing.T) {
	f := newFixture(t, nil)
	f.rt.setPods(withSandboxes(pod("p1", ctr("c1", running)), ctr("s1", running)))
	f.relist(t)
	drain(f.g.Watch())
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "s1", FinishedAt: finished})
	expectEvents(t, f.g.Watch())
	select {
	case req := <-f.g.requests:
		if req.uid != "p1" {
			t.Fatalf("relist requested for %s", req.uid)
		}
	default:
		t.Fatal("a sandbox exit requested no relist")
	}
}

// The evented path applies pending exits to the statuses it reads too.
func TestPatchExitsCopies(t *testing.T) {
	st := &kubetypes.PodStatus{ID: "p1", ContainerStatuses: []*kubetypes.ContainerStatus{
		{ID: "c1", State: running}, {ID: "c2", State: running}, {ID: "c3", State: exited, ExitCode: 5},
	}}
	exits := map[string]*exitOverride{
		"c1": {exit: ContainerExit{ID: "c1", ExitCode: 1, FinishedAt: finished}},
		"c3": {exit: ContainerExit{ID: "c3", ExitCode: 9, FinishedAt: finished}},
	}
	got := patchExits(st, exits)
	if got == st || st.ContainerStatuses[0].State != running {
		t.Fatal("patchExits modified its input")
	}
	if c := got.ContainerStatuses[0]; c.State != exited || c.ExitCode != 1 || c.Reason != ReasonError || !c.ExitUnconfirmed {
		t.Fatalf("c1 %+v (want exited, code 1, Error, ExitUnconfirmed: the runtime checks it before a restart)", c)
	}
	if got.ContainerStatuses[2].ExitUnconfirmed {
		t.Fatal("c3, exited in the CRI's own listing, is marked ExitUnconfirmed")
	}
	if got.ContainerStatuses[1] != st.ContainerStatuses[1] || got.ContainerStatuses[2] != st.ContainerStatuses[2] {
		t.Fatal("patchExits changed containers it had no exit for, or one the CRI shows exited")
	}
	if patchExits(st, nil) != st {
		t.Fatal("patchExits copied without exits")
	}
}
