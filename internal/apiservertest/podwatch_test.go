package apiservertest_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/apiservertest"
)

func pod(name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: v1.PodStatus{Phase: phase}}
}

// The watch records create-to-Running per pod it was told about, counts
// every Running pod, and records a deletion's request, end and last
// container state. Only the namespace's pods count.
func TestPodWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := clocktesting.NewFakePassiveClock(t0)
		c := fake.NewClientset(pod("before", v1.PodRunning), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere"},
			Status: v1.PodStatus{Phase: v1.PodRunning}})
		pods := c.CoreV1().Pods("ns")
		w := apiservertest.WatchPods(ctx, c, "ns", clk)
		defer w.Stop()
		synctest.Wait()
		if !w.HasSynced() {
			t.Fatal("not synced after the initial list")
		}
		if n := w.Running(); n != 1 {
			t.Fatalf("Running = %d after the initial list, want 1 (the namespace's Running pod)", n)
		}

		w.Creating("a")
		w.Creating("b")
		clk.SetTime(t0.Add(2 * time.Second))
		if _, err := pods.Create(ctx, pod("a", v1.PodPending), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Create(ctx, pod("b", v1.PodRunning), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		clk.SetTime(t0.Add(5 * time.Second))
		a := pod("a", v1.PodRunning)
		a.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}}}
		if _, err := pods.UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		clk.SetTime(t0.Add(7 * time.Second))
		if _, err := pods.UpdateStatus(ctx, pod("b", v1.PodRunning), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, want := w.RunningLatencies(), []time.Duration{2 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("RunningLatencies = %v, want %v (b Running when created, a 3 s later; later updates do not count)", got, want)
		}
		if n := w.Running(); n != 3 {
			t.Errorf("Running = %d, want 3", n)
		}

		clk.SetTime(t0.Add(10 * time.Second))
		w.Deleting("a")
		clk.SetTime(t0.Add(14 * time.Second))
		if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := w.Gone(); n != 1 {
			t.Errorf("Gone = %d, want 1", n)
		}
		asked, gone, last := w.Deletion("a")
		if !asked.Equal(t0.Add(10*time.Second)) || !gone.Equal(t0.Add(14*time.Second)) || last == nil || last.ExitCode != 137 {
			t.Errorf("Deletion(a) = %v, %v, %+v; want +10s, +14s, exit 137", asked.Sub(t0), gone.Sub(t0), last)
		}
		if asked, gone, last := w.Deletion("b"); !asked.IsZero() || !gone.IsZero() || last != nil {
			t.Errorf("Deletion(b) = %v, %v, %+v for a pod not deleted, want zeros", asked, gone, last)
		}
		w.Stop()
		w.Stop() // a second Stop returns too
	})
}
