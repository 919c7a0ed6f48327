package podworkers

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestPerPodStateForgotten (issue 29): once pods are removed from the
// desired set and their workers finish, SyncKnownPods forgets them: no
// worker, no sync status, no static-pod name claimed or waited for; the
// work queue lets go of each UID when it comes due (the sync loop takes
// due UIDs on every tick), at most ResyncInterval later.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  func(i int) *v1.Pod
	}{
		{"API pods", func(i int) *v1.Pod { return newPod(fmt.Sprintf("u%d", i), fmt.Sprintf("p%d", i)) }},
		// Two UIDs per static name: one started, one waiting.
		{"static pods", func(i int) *v1.Pod { return newStatic(fmt.Sprintf("s%d", i), fmt.Sprintf("web%d", i/2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withWorkers(t, Config{}, func(t *testing.T, e *env) {
				for i := range 40 {
					e.update(SyncPodCreate, tc.pod(i))
				}
				if n := e.workerCount(); n == 0 {
					t.Fatal("no workers started")
				}
				// Removed from the config: the first call begins stopping
				// them, later ones forget those that finished.
				for range 3 {
					e.p.SyncKnownPods(nil)
					synctest.Wait()
				}
				<-time.After(DefaultResyncInterval + time.Second)
				e.p.WorkQueue().GetWork()
				e.p.mu.Lock()
				w, s, st, ws := len(e.p.workers), len(e.p.statuses), len(e.p.startedStatic), len(e.p.waitingStatic)
				e.p.mu.Unlock()
				if w+s+st+ws != 0 {
					t.Errorf("kept: %d workers, %d statuses, %d started static names, %d waiting static names", w, s, st, ws)
				}
				if n := e.p.WorkQueue().Len(); n != 0 {
					t.Errorf("work queue keeps %d UIDs", n)
				}
			})
		})
	}
}
