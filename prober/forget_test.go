package prober

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestPerPodStateForgotten (issue 29): the probe workers of pods gone from
// the desired set (CleanupPods, which the sync loop's housekeeping calls)
// or removed (RemovePod) exit, and each takes its container's results
// with it; a restarted container's old result goes when the worker moves
// to the new instance.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(m *Manager, pods []types.UID)
	}{
		{"CleanupPods", func(m *Manager, _ []types.UID) { m.CleanupPods(nil) }},
		{"RemovePod", func(m *Manager, uids []types.UID) {
			for _, uid := range uids {
				p := testPod(Readiness, execProbe())
				p.UID = uid
				m.RemovePod(p)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, cancel, done := newSyncEnv(t, func(time.Duration) time.Duration { return 0 })
				var uids []types.UID
				for i := range 30 {
					for _, pt := range []ProbeType{Readiness, Liveness, Startup} {
						p := testPod(pt, execProbe())
						p.UID = types.UID(fmt.Sprintf("uid-%d-%d", i, pt))
						e.status.setStatus(p.UID, runningStatus(fmt.Sprintf("containerd://c%d-%d", i, pt), pt != Startup, time.Now()))
						e.m.AddPod(p)
						uids = append(uids, p.UID)
					}
				}
				advance(25 * time.Second)
				synctest.Wait()
				// Every container restarts once: the old results must go.
				for i, uid := range uids {
					e.status.setStatus(uid, runningStatus(fmt.Sprintf("containerd://r%d", i), true, time.Now()))
				}
				advance(25 * time.Second)
				synctest.Wait()
				e.m.results.mu.RLock()
				n := len(e.m.results.m)
				e.m.results.mu.RUnlock()
				if n != len(uids) {
					t.Fatalf("%d results for %d running probes", n, len(uids))
				}
				tc.remove(e.m, uids)
				synctest.Wait()
				if n := e.m.Workers(); n != 0 {
					t.Errorf("%d workers kept", n)
				}
				e.m.results.mu.RLock()
				n = len(e.m.results.m)
				e.m.results.mu.RUnlock()
				if n != 0 {
					t.Errorf("%d results kept", n)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
