package syncloop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

// TestPerPodStateForgotten (issue 29): pods added and removed leave
// nothing behind in the loop (its pods, the UIDs it may have to forget,
// the rejected pods, the pod directories it made), nor in the parts it
// drives: the status manager and its sink, the pod workers, the PLEG's
// cache and the runtime (container GC). Also when every PLEG event is
// dropped (an overloaded agent): relisting and housekeeping must still
// finish the pods and remove their directories.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		forward bool
	}{
		{"PLEG events delivered", true},
		{"every PLEG event dropped", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			synctest.Test(t, func(t *testing.T) {
				e := ltNew(t, clock.RealClock{}, nil)
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); _ = e.plg.Run(ctx) }()
				if tc.forward {
					e.forward(ctx, &wg)
				} else {
					wg.Add(1)
					go func() { // read and drop every event
						defer wg.Done()
						for {
							select {
							case <-ctx.Done():
								return
							case <-e.plg.Watch():
							}
						}
					}()
				}
				done := make(chan error, 1)
				go func() { done <- e.loop.Run(ctx) }()

				var pods []*v1.Pod
				for i := range 30 {
					p := ltPod(fmt.Sprintf("u%d", i), fmt.Sprintf("web%d", i), i)
					if i%3 == 0 { // a crash-looping second container
						p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "crash", Image: "busybox", Command: []string{"false"}})
					}
					pods = append(pods, p)
				}
				e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: pods, Source: "api"}
				ltAdvance(20 * time.Second)
				if st, ok := e.sink.Get("u1"); !ok || st.Phase != v1.PodRunning {
					t.Fatalf("u1 not Running: %v %+v", ok, st)
				}
				if d, _ := os.ReadDir(filepath.Join(e.root, PodsDirName)); len(d) != len(pods) {
					t.Fatalf("%d pod directories, want %d", len(d), len(pods))
				}
				e.updates <- kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: pods, Source: "api"}
				// Stopped within the grace (5 s), forgotten by housekeeping,
				// collected by container GC (every minute).
				ltAdvance(2 * time.Minute)

				l := e.loop
				l.podsMu.Lock()
				np, ns, nn := len(l.pods), len(l.seen), len(l.noContainers)
				l.podsMu.Unlock()
				if np+ns+nn != 0 {
					t.Errorf("loop keeps %d pods, %d seen UIDs, %d rejected pods", np, ns, nn)
				}
				l.podSyncer.dirs.mu.Lock()
				made := len(l.podSyncer.dirs.made)
				l.podSyncer.dirs.mu.Unlock()
				if made != 0 {
					t.Errorf("%d pod directories still marked made", made)
				}
				if d, _ := os.ReadDir(filepath.Join(e.root, PodsDirName)); len(d) != 0 {
					t.Errorf("%d pod directories left, e.g. %s", len(d), d[0].Name())
				}
				if known := l.PodWorkers().SyncKnownPods(nil); len(known) != 0 {
					t.Errorf("pod workers know %d pods", len(known))
				}
				for _, p := range pods {
					if _, ok := l.StatusManager().GetPodStatus(p.UID); ok {
						t.Errorf("status manager keeps %s", p.UID)
					}
					if _, ok := e.sink.Get(p.UID); ok {
						t.Errorf("sink keeps %s", p.UID)
					}
				}
				if n := e.plg.Cache().Len(); n != 0 {
					t.Errorf("PLEG cache keeps %d pods", n)
				}
				sbs, _ := e.rt.ListPodSandbox(ctx, nil)
				cs, _ := e.rt.ListContainers(ctx, nil)
				if len(sbs)+len(cs) != 0 {
					t.Errorf("runtime keeps %d sandboxes and %d containers", len(sbs), len(cs))
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				wg.Wait()
			})
		})
	}
}
