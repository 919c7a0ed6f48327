package containermgr

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPerPodStateForgotten (issue 29): the pods the manager tracks for the
// QoS shares go with DestroyPodCgroup, or with CleanupOrphans once they
// are not active, also when their cgroup is already gone (nothing to
// remove); their cgroups are removed.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, m *Manager, root string, pods []*v1.Pod)
	}{
		{"DestroyPodCgroup", func(t *testing.T, m *Manager, _ string, pods []*v1.Pod) {
			for _, p := range pods {
				if err := m.DestroyPodCgroup(t.Context(), p); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"CleanupOrphans", func(t *testing.T, m *Manager, _ string, _ []*v1.Pod) {
			if _, err := m.CleanupOrphans(t.Context(), nil, true); err != nil {
				t.Fatal(err)
			}
		}},
		{"CleanupOrphans, cgroups already gone", func(t *testing.T, m *Manager, root string, pods []*v1.Pod) {
			for _, p := range pods {
				for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
					if err := os.RemoveAll(filepath.Join(root, c, "kubepods", "burstable", "pod"+string(p.UID))); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := m.CleanupOrphans(t.Context(), nil, true); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := v1Root(t)
			m := newTestManager(t, root, V1, nil)
			var pods []*v1.Pod
			for i := range 6 {
				p := burstable()
				p.UID, p.Name = types.UID(fmt.Sprintf("b-%d", i)), fmt.Sprintf("b%d", i)
				if err := m.EnsurePodCgroup(t.Context(), p); err != nil {
					t.Fatal(err)
				}
				pods = append(pods, p)
			}
			if len(m.active) != 6 {
				t.Fatalf("%d pods tracked, want 6", len(m.active))
			}
			tc.remove(t, m, root, pods)
			m.mu.Lock()
			n := len(m.active)
			m.mu.Unlock()
			if n != 0 {
				t.Errorf("%d pods still tracked", n)
			}
			left, _ := os.ReadDir(filepath.Join(root, "memory", "kubepods", "burstable"))
			for _, e := range left {
				if e.IsDir() {
					t.Errorf("pod cgroup left: %s", e.Name())
				}
			}
		})
	}
}
