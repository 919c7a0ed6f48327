package podconfig

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// TestPerPodStateForgotten (issue 29): what podconfig keeps per pod goes
// with the pod: the merge's stored pods, their delivery order and UID
// owners once the sources drop them (an empty SET, a REMOVE); the push
// source's pods on DELETE; the file source's per-file state once the
// manifests are removed.
func TestPerPodStateForgotten(t *testing.T) {
	pods := func(prefix string, n int) []*v1.Pod {
		var out []*v1.Pod
		for i := range n {
			out = append(out, mkPod(fmt.Sprintf("%s-uid%d", prefix, i), fmt.Sprintf("%s%d", prefix, i)))
		}
		return out
	}
	t.Run("merge", func(t *testing.T) {
		for _, mode := range []Mode{Incremental, Snapshot, SnapshotAndUpdates} {
			c, _ := newTestConfig(t, mode)
			c.Merge("a", set(pods("a", 50)...))
			c.Merge("b", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: pods("b", 50)})
			c.Merge("a", set())
			c.Merge("b", kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: pods("b", 50)})
			c.mu.Lock()
			n := len(c.owners)
			for name, s := range c.sources {
				if len(s.pods)+len(s.order) != 0 {
					t.Errorf("mode %v: source %s keeps %d pods, %d in its order", mode, name, len(s.pods), len(s.order))
				}
				if kept := slices.DeleteFunc(slices.Clone(s.order[:cap(s.order)]), func(u types.UID) bool { return u == "" }); len(kept) != 0 {
					t.Errorf("mode %v: source %s's order array keeps %d gone UIDs", mode, name, len(kept))
				}
			}
			// Nor does the scratch space: no UID in the spare order
			// array, no slab holding pods carved from it.
			sc := &c.scratch
			if kept := slices.DeleteFunc(slices.Clone(sc.order[:cap(sc.order)]), func(u types.UID) bool { return u == "" }); len(kept) != 0 {
				t.Errorf("mode %v: the spare order array keeps %d gone UIDs", mode, len(kept))
			}
			if sc.slabs.pods != nil || sc.slabs.entries != nil {
				t.Errorf("mode %v: a slab is kept (its array holds the pods carved from it)", mode)
			}
			c.mu.Unlock()
			if n != 0 {
				t.Errorf("mode %v: %d UID owners kept", mode, n)
			}
			if n := len(c.MergedState()); n != 0 {
				t.Errorf("mode %v: %d pods merged", mode, n)
			}
		}
	})
	t.Run("push", func(t *testing.T) {
		h, out := newTestPush(t, PushConfig{})
		if rec := doPush(h, http.MethodPost, "/", "application/json", testPodJSON); rec.Code != http.StatusOK {
			t.Fatalf("POST = %d %s", rec.Code, rec.Body)
		}
		<-out
		if rec := doPush(h, http.MethodDelete, "/default/web-node1", "", ""); rec.Code != http.StatusOK {
			t.Fatalf("DELETE = %d %s", rec.Code, rec.Body)
		}
		<-out
		if n := len(h.pods); n != 0 {
			t.Errorf("push source keeps %d pods", n)
		}
	})
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		for i := range 20 {
			write(t, filepath.Join(dir, fmt.Sprintf("m%d.yaml", i)), manifest(fmt.Sprintf("m%d", i)))
		}
		write(t, filepath.Join(dir, "bad.yaml"), "kind: [")
		h := newFileHarness(t, dir)
		h.sync(t)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		h.sync(t)
		h.src.mu.Lock()
		defer h.src.mu.Unlock()
		if n := len(h.src.files) + len(h.src.held); n != 0 {
			t.Errorf("file source keeps %d files, %d held", len(h.src.files), len(h.src.held))
		}
	})
}
