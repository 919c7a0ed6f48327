package memorymanager

import (
	"fmt"
	"testing"
)

// TestPerPodStateForgotten (issue 29): a pod's NUMA blocks go with
// RemovePod, which the agent calls when the pod has terminated
// (PodTerminated); a restart rebuilds the table from the active pods only
// (TestRebuildFromActivePodsAfterCorruptCheckpoint).
func TestPerPodStateForgotten(t *testing.T) {
	m := newStatic(t, t.TempDir())
	var uids []string
	for i := range 4 {
		p := gpod(fmt.Sprintf("g%d", i), "1Gi")
		if err := m.AllocatePod(p); err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(p.UID))
	}
	if len(m.entries) != len(uids) {
		t.Fatalf("%d entries, want %d", len(m.entries), len(uids))
	}
	for _, uid := range uids {
		if err := m.RemovePod(uid); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.entries) != 0 {
		t.Errorf("%d pods keep blocks", len(m.entries))
	}
}
