package syncloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// A deleted pod's dead containers and sandbox are removed when its worker
// finishes, and a pod gone from the config when housekeeping forgets it,
// not at the next container GC (the kubelet's pod container deletor, for
// either PLEG); a pod that stopped on its own but is not deleted keeps them
// (its logs stay readable), and so does a running pod.
func TestDeletedPodContentRemovedWhenStopped(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		// Container GC ran at the first housekeeping and not again: what
		// goes is removed by the pod worker.
		e := ltNew(t, clock.RealClock{}, func(c *Config) { c.ContainerGCPeriod = time.Hour })
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- e.loop.Run(ctx) }()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.plg.Run(ctx) }()
		e.forward(ctx, &wg)

		deleted := ltPod("u-del", "deleted", 0)
		deleted.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}}
		completed := ltPod("u-done", "completed", 1, v1.Container{Name: "job", Image: "busybox", Command: []string{"false"}})
		completed.Spec.RestartPolicy = v1.RestartPolicyNever
		running := ltPod("u-run", "running", 2)
		removed := ltPod("u-rm", "removed", 3)
		evicted := ltPod("u-ev", "evicted", 4)
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{deleted, completed, running, removed, evicted}, Source: "api"}
		ltAdvance(20 * time.Second)
		for uid, phase := range map[types.UID]v1.PodPhase{"u-del": v1.PodRunning, "u-done": v1.PodFailed, "u-run": v1.PodRunning, "u-rm": v1.PodRunning, "u-ev": v1.PodRunning} {
			if st, ok := e.sink.Get(uid); !ok || st.Phase != phase {
				t.Fatalf("%s: phase %v (%v), want %v", uid, st.Phase, ok, phase)
			}
		}
		count := func(uid types.UID) (containers, sandboxes int) {
			sel := map[string]string{kuberuntime.LabelPodUID: string(uid)}
			cs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			sbs, err := e.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			return len(cs), len(sbs)
		}
		if c, s := count("u-del"); c != 2 || s != 1 {
			t.Fatalf("before the delete: %d containers, %d sandboxes of the pod, want 2 and 1", c, s)
		}

		// Deleted in the API (a deletion timestamp; still in the config):
		// removed when its worker finishes.
		del := deleted.DeepCopy()
		now := metav1.NewTime(time.Now())
		del.DeletionTimestamp = &now
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.DELETE, Pods: []*v1.Pod{del}, Source: "api"}
		ltAdvance(10 * time.Second) // stopped within its grace (5 s); the next GC is an hour away
		if !e.loop.PodWorkers().ShouldPodBeFinished("u-del") {
			t.Fatal("the deleted pod is not finished")
		}
		if _, ok := e.loop.Pod("u-del"); !ok {
			t.Fatal("the deleted pod left the config: this case is the one still in it")
		}
		if c, s := count("u-del"); c != 0 || s != 0 {
			t.Errorf("deleted pod: %d containers, %d sandboxes left, want none", c, s)
		}
		// Gone from the config (a static pod's manifest removed): removed
		// by the housekeeping that forgets it.
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{removed}, Source: "api"}
		ltAdvance(10 * time.Second)
		if st, ok := ltWorkerState(e.loop.PodWorkers(), "u-rm"); ok {
			t.Fatalf("the removed pod's worker is still %v", st)
		}
		if c, s := count("u-rm"); c != 0 || s != 0 {
			t.Errorf("removed pod: %d containers, %d sandboxes left, want none", c, s)
		}
		// Evicted as its API status says (another agent run evicted it;
		// the kubelet removes such a pod's dead containers too): an
		// update with that status stops it and removes its content.
		ev := evicted.DeepCopy()
		ev.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: kubetypes.ReasonEvicted, Message: "The node was low on resource: memory."}
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.UPDATE, Pods: []*v1.Pod{ev}, Source: "api"}
		ltAdvance(10 * time.Second)
		if !e.loop.PodWorkers().ShouldPodBeFinished("u-ev") {
			t.Fatal("the evicted pod is not finished")
		}
		if c, s := count("u-ev"); c != 0 || s != 0 {
			t.Errorf("evicted pod: %d containers, %d sandboxes left, want none", c, s)
		}
		if c, s := count("u-done"); c != 1 || s != 1 {
			t.Errorf("completed pod: %d containers, %d sandboxes, want 1 and 1 (kept for its logs)", c, s)
		}
		if c, s := count("u-run"); c != 1 || s != 1 {
			t.Errorf("running pod: %d containers, %d sandboxes, want 1 and 1", c, s)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	})
}

// removingStub is ltStub with RemovePodContent: it records the UIDs asked
// for and answers err.
type removingStub struct {
	*ltStub
	err  error
	uids []types.UID
}

func (s *removingStub) RemovePodContent(_ context.Context, uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uids = append(s.uids, uid)
	return s.err
}

// Housekeeping removes the content of every pod it forgets; the first
// failure ends the round (a hanging runtime holds the loop for one call,
// not one per pod), and container GC, not the next round, retries.
func TestHousekeepingRemovesGonePodsContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"every gone pod", nil, 3},
		{"the first failure ends the round", errors.New("runtime hangs"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rm := &removingStub{err: tc.err}
				l, _, _ := ltStubLoop(t, clock.RealClock{}, func(c *Config) {
					rm.ltStub = c.Runtime.(*ltStub)
					c.Runtime = rm
				})
				pods := []*v1.Pod{ltPod("1", "a", 0), ltPod("2", "b", 1), ltPod("3", "c", 2)}
				l.HandlePodAdditions(pods)
				synctest.Wait()
				l.HandlePodRemoves(pods)
				synctest.Wait()
				for range 2 {
					if err := l.HandlePodCleanups(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				rm.mu.Lock()
				got := append([]types.UID(nil), rm.uids...)
				rm.mu.Unlock()
				if len(got) != tc.want {
					t.Fatalf("RemovePodContent called for %v, want %d calls", got, tc.want)
				}
				l.podsMu.Lock()
				n := len(l.seen)
				l.podsMu.Unlock()
				if n != 0 {
					t.Fatalf("the loop still has %d UIDs to forget", n)
				}
			})
		})
	}
}
