package cpumanager

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestPerPodStateForgotten (issue 29): a pod's exclusive CPUs (the
// assignment and its rendered text) go with RemovePod, which the agent
// calls when the pod has terminated, or with the first Reconcile once the
// pod is not active (a removal that was missed); the cpusets last applied
// are kept for running containers only.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, m *Manager, uids []string)
	}{
		{"RemovePod", func(t *testing.T, m *Manager, uids []string) {
			for _, uid := range uids {
				if err := m.RemovePod(uid); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"Reconcile", func(t *testing.T, m *Manager, _ []string) {
			if err := m.Reconcile(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready := true
			var active []*v1.Pod
			m := restartFrom(t, t.TempDir(), func() []*v1.Pod { return active }, &ready)
			var uids []string
			for i := range 3 {
				p := pod(fmt.Sprintf("g%d", i), true, "1")
				if err := m.AllocatePod(p); err != nil {
					t.Fatal(err)
				}
				uids = append(uids, string(p.UID))
			}
			if len(m.st.entries) != 3 {
				t.Fatalf("%d pods assigned, want 3", len(m.st.entries))
			}
			tc.remove(t, m, uids)
			m.mu.Lock()
			defer m.mu.Unlock()
			if n := len(m.st.entries) + len(m.st.text) + len(m.lastApplied); n != 0 {
				t.Errorf("kept: %d assignments, %d rendered, %d applied cpusets", len(m.st.entries), len(m.st.text), len(m.lastApplied))
			}
		})
	}
}
