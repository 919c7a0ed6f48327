package podstatus

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPerPodStateForgotten (issue 29): what the status manager and the
// MemorySink keep per pod is gone once the pod is: deleted through
// TerminatePod and a sync, or orphaned (RemoveOrphanedStatuses and a sync).
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name         string
		remove       func(m *Manager, pods []*v1.Pod)
		deletedMarks int // the sink's bounded history of deleted pods
	}{
		{"terminated and deleted", func(m *Manager, pods []*v1.Pod) {
			for _, p := range pods {
				p.DeletionTimestamp = &metav1.Time{Time: pstNow}
				m.TerminatePod(p)
			}
		}, 50},
		{"orphaned", func(m *Manager, _ []*v1.Pod) { m.RemoveOrphanedStatuses(nil) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := NewMemorySink()
			m, _ := stManager(t, sink)
			var pods []*v1.Pod
			for i := range 50 {
				p := stPod()
				p.Name, p.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				m.SetPodStatus(p, stRunningStatus())
				pods = append(pods, p)
			}
			if err := m.SyncOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(m.statuses) != 50 || len(m.sent) != 50 || len(sink.statuses) != 50 {
				t.Fatalf("before: %d statuses, %d sent, %d in the sink; want 50 each", len(m.statuses), len(m.sent), len(sink.statuses))
			}
			tc.remove(m, pods)
			// Two syncs: a deleted pod is dropped by the sync that
			// deletes it, an orphan by the next one.
			for range 2 {
				if err := m.SyncOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			m.RemoveOrphanedStatuses(nil)
			if err := m.SyncOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			st, pend := len(m.statuses), len(m.pending)
			m.mu.Unlock()
			if st+pend+len(m.sent) != 0 {
				t.Errorf("status manager keeps %d statuses, %d pending, %d sent", st, pend, len(m.sent))
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if len(sink.statuses) != 0 {
				t.Errorf("MemorySink keeps %d statuses", len(sink.statuses))
			}
			if want := tc.deletedMarks; len(sink.deleted) != want {
				t.Errorf("MemorySink keeps %d deleted marks, want %d", len(sink.deleted), want)
			}
		})
	}
}

// TestMemorySinkDeletedMarksBounded: the deleted marks are a bounded
// history (MaxDeletedMarks, the newest kept), and ForgetPod drops one.
func TestMemorySinkDeletedMarksBounded(t *testing.T) {
	s := NewMemorySink()
	n := 3*MaxDeletedMarks + 7
	for i := range n {
		p := stPod()
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		if err := s.SyncPodStatus(t.Context(), p, stRunningStatus()); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePod(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			s.ForgetPod(p.UID) // forgotten marks must not pile up in the order
		}
	}
	if len(s.deleted) > MaxDeletedMarks || len(s.order) > 2*MaxDeletedMarks+1 {
		t.Errorf("%d deleted marks, %d in the order: want at most %d and %d", len(s.deleted), len(s.order), MaxDeletedMarks, 2*MaxDeletedMarks+1)
	}
	if !s.Deleted(types.UID(fmt.Sprintf("uid-%d", n-2))) {
		t.Error("the newest deleted mark was dropped")
	}
	if s.Deleted(types.UID(fmt.Sprintf("uid-%d", n-1))) {
		t.Error("a forgotten pod is still marked deleted")
	}
	if len(s.statuses) != 0 {
		t.Errorf("%d statuses of deleted pods kept", len(s.statuses))
	}
}
