package syncloop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

var _ deadContainerRemover = (*kuberuntime.Manager)(nil)

// dlInstances returns how many instances of a pod's container the runtime
// holds in each state, their ids, and the newest one's restart count (its
// annotation), newest first.
func dlInstances(t *testing.T, e *ltEnv, uid types.UID, name string) (states map[kubetypes.ContainerState]int, ids []string, newestRestarts int) {
	t.Helper()
	st, err := e.mgr.GetPodStatus(t.Context(), uid, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	states = make(map[kubetypes.ContainerState]int)
	newestRestarts = -1
	for _, cs := range st.ContainerStatuses { // newest first
		if cs.Name != name {
			continue
		}
		if newestRestarts < 0 {
			newestRestarts = cs.RestartCount
		}
		states[cs.State]++
		ids = append(ids, cs.ID)
	}
	return states, ids, newestRestarts
}

// dlRun starts the loop, the PLEG and the event forwarding of e; the
// returned stop ends them and checks that Run returned nil.
func dlRun(t *testing.T, e *ltEnv) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.plg.Run(ctx) }()
	e.forward(ctx, &wg)
	done := make(chan error, 1)
	go func() { done <- e.loop.Run(ctx) }()
	return ctx, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		wg.Wait()
	}
}

// A crash-looping container's older dead instances are removed at each of
// its deaths, not at the next container GC (an hour away here): the newest
// stays, restart counts in the runtime and in the pod's status stay right
// (one less than the instances created), its last state is still there, and
// the pod's running container is untouched.
func TestCrashLoopOlderDeadInstancesRemoved(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		e := ltNew(t, clock.RealClock{}, func(c *Config) { c.ContainerGCPeriod = time.Hour })
		_, stop := dlRun(t, e)
		defer stop()
		pod := ltPod("u-cl", "crashloop", 0,
			v1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "infinity"}},
			v1.Container{Name: "crash", Image: "busybox", Command: []string{"false"}})
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{pod}, Source: "api"}
		ltAdvance(3 * time.Second)
		_, appIDs, _ := dlInstances(t, e, pod.UID, "app")
		if len(appIDs) != 1 {
			t.Fatalf("app instances: %v", appIDs)
		}
		// Back-off 10, 20, 40, 80, 160 s: five restarts or more in 6 min.
		ltAdvance(6 * time.Minute)

		created := e.rt.CountCalls("CreateContainer") - 1 // app's one
		if created < 5 {
			t.Fatalf("crash created %d times, want a crash loop", created)
		}
		t.Logf("crash created %d times", created)
		states, ids, restarts := dlInstances(t, e, pod.UID, "crash")
		if states[kubetypes.ContainerStateExited] != 1 || len(ids) > 2 {
			t.Errorf("crash instances in the runtime: %v (%d), want the newest dead one only (and a new one)", states, len(ids))
		}
		if restarts != created-1 {
			t.Errorf("newest instance's restart count %d, want %d", restarts, created-1)
		}
		st, ok := e.sink.Get(pod.UID)
		if !ok {
			t.Fatal("no status")
		}
		for _, cs := range st.ContainerStatuses {
			switch cs.Name {
			case "crash":
				if cs.RestartCount != int32(created-1) {
					t.Errorf("status restartCount %d, want %d", cs.RestartCount, created-1)
				}
				last := cs.LastTerminationState.Terminated
				if cur := cs.State.Terminated; last == nil && cur == nil {
					t.Errorf("status of crash has no termination: %+v", cs)
				} else if last != nil && last.ExitCode != 1 {
					t.Errorf("last state %+v, want exit 1", last)
				}
			case "app":
				if cs.State.Running == nil || cs.RestartCount != 0 {
					t.Errorf("app status %+v", cs)
				}
			}
		}
		states, ids, _ = dlInstances(t, e, pod.UID, "app")
		if states[kubetypes.ContainerStateRunning] != 1 || len(ids) != 1 || ids[0] != appIDs[0] {
			t.Errorf("app instances %v %v, want %s running", states, ids, appIDs[0])
		}
	})
}

// A removal that fails is logged and the dead instances are left to
// container GC; the pod goes on restarting with the right count.
func TestDeadContainerRemovalFailureLogged(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		e := ltNew(t, clock.RealClock{}, func(c *Config) {
			c.ContainerGCPeriod = time.Hour
			c.Logger = zap.New(core)
		})
		ctx, stop := dlRun(t, e)
		defer stop()
		boom := errors.New("disk on fire")
		e.rt.InjectError("RemoveContainer", boom, -1)
		pod := ltPod("u-f", "failing", 0, v1.Container{Name: "crash", Image: "busybox", Command: []string{"false"}})
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{pod}, Source: "api"}
		ltAdvance(3 * time.Minute)

		created := e.rt.CountCalls("CreateContainer")
		states, _, restarts := dlInstances(t, e, pod.UID, "crash")
		if created < 4 || states[kubetypes.ContainerStateExited] < 3 {
			t.Fatalf("created %d, instances %v: want several dead ones kept", created, states)
		}
		if restarts != created-1 {
			t.Errorf("newest restart count %d, want %d", restarts, created-1)
		}
		failed := logs.FilterMessageSnippet("cannot remove dead containers").FilterField(zap.String("uid", "u-f")).All()
		if len(failed) == 0 {
			t.Fatalf("no log of the failed removal; logs: %v", logs.All())
		}
		if err, _ := failed[0].ContextMap()["error"].(string); !strings.Contains(err, boom.Error()) {
			t.Errorf("logged error %q, want the runtime's", err)
		}
		// Container GC removes them once the runtime can.
		e.rt.ClearFaults()
		if err := e.mgr.GarbageCollect(ctx, kubetypes.GCPolicy{}, e.loop.PodWorkers(), true); err != nil {
			t.Fatal(err)
		}
		if states, _, _ := dlInstances(t, e, pod.UID, "crash"); states[kubetypes.ContainerStateExited] > 1 {
			t.Errorf("after container GC: %v", states)
		}
	})
}

// dlRemover is a RuntimeManager with the deadContainerRemover capability
// that records its requests and, while release is open, waits for it.
type dlRemover struct {
	RuntimeManager
	release chan struct{}
	mu      sync.Mutex
	reqs    []deleteRequest
}

func (r *dlRemover) RemoveDeadContainers(ctx context.Context, uid types.UID, containerID string, keep int) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, deleteRequest{uid: uid, containerID: containerID, keep: keep})
	r.mu.Unlock()
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return nil
}

func (r *dlRemover) requests() []deleteRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]deleteRequest(nil), r.reqs...)
}

// dlStubLoop is a loop over ltStub seen through a dlRemover, with an
// events channel.
func dlStubLoop(t *testing.T, core zapcore.Core, mod func(*Config)) (*Loop, *ltStub, *dlRemover, chan kubetypes.PodUpdate, chan *kubetypes.PodLifecycleEvent) {
	t.Helper()
	events := make(chan *kubetypes.PodLifecycleEvent, 100)
	rm := &dlRemover{release: make(chan struct{})}
	l, stub, updates := ltStubLoop(t, clock.RealClock{}, func(c *Config) {
		rm.RuntimeManager = c.Runtime
		c.Runtime, c.Events, c.Logger = rm, events, zap.New(core)
		if mod != nil {
			mod(c)
		}
	})
	return l, stub, rm, updates, events
}

// While the deletor is busy, ContainerDied events neither block the loop
// nor pile up: up to 50 requests wait and the rest are dropped (logged),
// as the kubelet's deletor does; the loop goes on syncing pods.
func TestDeletorBusyDoesNotBlockLoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		l, stub, rm, updates, events := dlStubLoop(t, core, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()

		died := func(i int) *kubetypes.PodLifecycleEvent {
			return &kubetypes.PodLifecycleEvent{ID: "u-gone", Type: kubetypes.ContainerDied, Data: fmt.Sprintf("c%d", i)}
		}
		events <- died(0)
		synctest.Wait()
		if n := len(rm.requests()); n != 1 {
			t.Fatalf("%d requests being served, want 1 (blocked)", n)
		}
		for i := 1; i <= deletorQueue+10; i++ {
			events <- died(i)
		}
		synctest.Wait()
		if n := len(events); n != 0 {
			t.Fatalf("%d events left: the loop is blocked", n)
		}
		pod := ltPod("u-next", "next", 0)
		updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{pod}, Source: "api"}
		ltAdvance(time.Second)
		if syncs, _, _ := stub.counts(); syncs == 0 {
			t.Fatal("the loop did not sync a new pod while the deletor was busy")
		}
		if n := logs.FilterMessageSnippet("dead container removal dropped").Len(); n != 10 {
			t.Errorf("%d drops logged, want 10", n)
		}
		close(rm.release)
		synctest.Wait()
		if n := len(rm.requests()); n != 1+deletorQueue {
			t.Errorf("%d requests served, want %d", n, 1+deletorQueue)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// What a ContainerDied event asks for: the dead container's older instances
// of a pod that may still run, keeping Config.GCPolicy.MaxPerPodContainer;
// every dead container of a pod evicted as its status says, or unknown once
// the pods were synced (its content may go); nothing for a sandbox, for an
// event without a container id, or for other events.
func TestDeadContainerRequests(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		core, _ := observer.New(zapcore.InfoLevel)
		l, _, rm, updates, events := dlStubLoop(t, core, func(c *Config) { c.GCPolicy.MaxPerPodContainer = 3 })
		close(rm.release)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()

		run := ltPod("u-run", "run", 0)
		ev := ltPod("u-ev", "ev", 1)
		ev.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: kubetypes.ReasonEvicted}
		updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{run, ev}, Source: "api"}
		synctest.Wait()
		for _, e := range []*kubetypes.PodLifecycleEvent{
			{ID: "u-run", Type: kubetypes.ContainerDied, Data: "c1"},
			{ID: "u-run", Type: kubetypes.ContainerDied, Data: "s1", Sandbox: true},
			{ID: "u-run", Type: kubetypes.ContainerDied},
			{ID: "u-run", Type: kubetypes.ContainerDied, Data: ""},
			{ID: "u-run", Type: kubetypes.ContainerStarted, Data: "c2"},
			{ID: "u-run", Type: kubetypes.PodSync},
			{ID: "u-ev", Type: kubetypes.ContainerDied, Data: "c3"},
			// Before the pods were synced:
			{ID: "u-gone", Type: kubetypes.ContainerDied, Data: "c4"},
		} {
			events <- e
			synctest.Wait()
		}
		ltAdvance(3 * time.Second) // housekeeping: the pod workers know every pod
		events <- &kubetypes.PodLifecycleEvent{ID: "u-gone", Type: kubetypes.ContainerDied, Data: "c5"}
		synctest.Wait()

		want := []deleteRequest{
			{uid: "u-run", containerID: "c1", keep: 3},
			{uid: "u-ev", keep: 0},
			{uid: "u-gone", containerID: "c4", keep: 3},
			{uid: "u-gone", keep: 0},
		}
		if got := rm.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requests %+v, want %+v", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// A request that is already waiting is not queued again: removing a gone
// pod's dead containers brings one ContainerDied event per container with
// an evented PLEG, each asking for the same removal of all of them. Once
// served, the same request can be queued again.
func TestDeletorQueuesARequestOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		l, _, rm, updates, events := dlStubLoop(t, core, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{ltPod("u-run", "run", 0)}, Source: "api"}
		synctest.Wait()
		ltAdvance(3 * time.Second) // housekeeping: the pods are synced, unknown ones may go

		died := func(uid types.UID, i int) *kubetypes.PodLifecycleEvent {
			return &kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerDied, Data: fmt.Sprintf("c%d", i)}
		}
		events <- died("u-block", 0) // served, and blocked until release
		synctest.Wait()
		for i := range 5 {
			events <- died("u-gone", i)
			events <- died("u-other", i)
		}
		synctest.Wait()
		if n := len(l.deletor.requests); n != 2 {
			t.Errorf("%d requests queued, want 2 (one per pod)", n)
		}
		close(rm.release)
		synctest.Wait()
		events <- died("u-gone", 9)
		synctest.Wait()
		want := []deleteRequest{{uid: "u-block"}, {uid: "u-gone"}, {uid: "u-other"}, {uid: "u-gone"}}
		if got := rm.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requests served %+v, want %+v", got, want)
		}
		if n := logs.FilterMessageSnippet("dead container removal dropped").Len(); n != 0 {
			t.Errorf("%d drops logged, want none", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
