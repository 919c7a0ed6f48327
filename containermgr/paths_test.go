package containermgr

import (
	"errors"
	"testing"
)

// MemoryCgroupPaths names the cgroup file system root and the pods cgroup
// under it, once the manager has started: on v1 the memory hierarchy is
// root/memory, on v2 root itself.
func TestMemoryCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version Version
		root    func(testing.TB) string
	}{
		{"v1", V1, v1Root},
		{"v2", V2, func(t testing.TB) string { return t.TempDir() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root(t)
			m := newTestManager(t, root, tc.version, nil)
			if _, _, err := m.MemoryCgroupPaths(); !errors.Is(err, ErrNotStarted) {
				t.Fatalf("before Start: %v, want ErrNotStarted", err)
			}
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			gotRoot, pods, err := m.MemoryCgroupPaths()
			if err != nil || gotRoot != root || pods != "kubepods" {
				t.Fatalf("MemoryCgroupPaths() = %q, %q, %v; want %q, kubepods", gotRoot, pods, err, root)
			}
		})
	}
}
