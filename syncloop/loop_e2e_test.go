package syncloop

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

// ltAdvance lets d of the bubble's virtual time pass (every goroutine of
// the bubble runs until it blocks), then waits for the bubble to settle.
func ltAdvance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// A pod runs end to end: ADD starts it on the fake runtime and its status
// becomes Running; a crashed container is restarted after the PLEG sees it
// die; DELETE stops it within its grace; REMOVE lets housekeeping remove its
// directory.
func TestEndToEnd(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		e := ltNew(t, clock.RealClock{}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.plg.Run(ctx) }()
		e.forward(ctx, &wg)
		done := make(chan error, 1)
		go func() { done <- e.loop.Run(ctx) }()

		pod := ltPod("u1", "web", 0)
		pod.Annotations[fake.BehaviorAnnotation("app")] = "sigterm=ignore"
		pod.Annotations[kubetypes.ConfigSourceAnnotation] = "api" // not a static pod: it may be deleted
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{pod}, Source: "api"}
		ltAdvance(3 * time.Second)
		select {
		case <-e.loop.Ready():
		default:
			t.Fatal("Ready not closed")
		}
		st, ok := e.sink.Get("u1")
		if !ok || st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("status after ADD: %v %+v", ok, st)
		}
		rs, err := e.mgr.GetPodStatus(ctx, "u1", "web", "default")
		if err != nil {
			t.Fatal(err)
		}
		app := rs.FindContainerStatusByName("app")
		if app == nil || app.State != kubetypes.ContainerStateRunning {
			t.Fatalf("runtime status: %+v", rs)
		}
		for _, sub := range []string{"", "containers"} {
			fi, err := os.Stat(filepath.Join(e.root, "pods", "u1", sub))
			if err != nil || fi.Mode().Perm() != 0o750 {
				t.Fatalf("pod dir %s: %v %v", sub, fi, err)
			}
		}

		// The container crashes: the PLEG's ContainerDied event syncs the pod
		// and the runtime restarts it (no back-off for a first crash).
		if err := e.rt.ExitContainer(app.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		ltAdvance(3 * time.Second)
		st, _ = e.sink.Get("u1")
		if cs := st.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil {
			t.Fatalf("after crash: %+v", cs)
		}

		// DELETE: the pod is stopped within its grace (5s; sleep ignores
		// SIGTERM, so it is killed at the end of it).
		del := pod.DeepCopy()
		now := metav1.NewTime(time.Now())
		grace := int64(5)
		del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &grace
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.DELETE, Pods: []*v1.Pod{del}, Source: "api"}
		ltAdvance(4 * time.Second)
		if rs, _ := e.mgr.GetPodStatus(ctx, "u1", "web", "default"); rs.FindContainerStatusByName("app").State != kubetypes.ContainerStateRunning {
			t.Fatalf("stopped before the end of its grace: %+v %+v", rs.FindContainerStatusByName("app"), e.rt.Calls())
		}
		ltAdvance(3 * time.Second)
		rs, _ = e.mgr.GetPodStatus(ctx, "u1", "web", "default")
		for _, cs := range rs.ContainerStatuses {
			if cs.State == kubetypes.ContainerStateRunning {
				t.Fatalf("still running after its grace: %+v", cs)
			}
		}
		if !e.loop.PodWorkers().ShouldPodBeFinished("u1") {
			t.Fatal("pod not finished")
		}
		if !e.sink.Deleted("u1") {
			st, ok := e.sink.Get("u1")
			sm, _ := e.loop.StatusManager().GetPodStatus("u1")
			t.Fatalf("finished deleted pod not deleted from the sink: %v %s %s / %s", ok, st.Phase, st.Message, sm.Phase)
		}

		// REMOVE: housekeeping removes the pod directory.
		e.updates <- kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{del}, Source: "api"}
		ltAdvance(3 * time.Second)
		if len(e.loop.Pods()) != 0 {
			t.Fatal("pod still known")
		}
		if _, err := os.Stat(filepath.Join(e.root, "pods", "u1")); !os.IsNotExist(err) {
			t.Fatalf("pod dir not removed: %v", err)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	})
}
