package kuberuntime

import (
	"time"

	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// TestPerPodStateForgotten (issue 29): what the engine keeps per pod (the
// crash-loop and image-pull back-offs, the last waiting reason of each
// container) goes with ForgetPod, which the sync loop's housekeeping calls
// once a pod is gone; back-offs of pods never forgotten expire (2x the
// maximum back-off) and garbage collection drops them.
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name        string
		remove      func(t *testing.T, m *Manager, uids []types.UID)
		wantReasons int
	}{
		{"ForgetPod", func(_ *testing.T, m *Manager, uids []types.UID) {
			for _, uid := range uids {
				m.ForgetPod(uid)
			}
		}, 0},
		{"expired back-offs collected", func(t *testing.T, m *Manager, _ []types.UID) {
			m.cfg.Clock.(interface{ Step(d time.Duration) }).Step(2*DefaultBackOffMax + 1)
			_ = m.GarbageCollect(t.Context(), kubetypes.GCPolicy{}, nil, true)
		}, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, clk := newTestManager(t, nil)
			var uids []types.UID
			for i := range 40 {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("uid-%d", i)), Name: fmt.Sprintf("p%d", i), Namespace: "ns"}}
				c := &v1.Container{Name: "c", Image: "busybox:1"}
				m.crashBackoff.next(backoffKey(&m.bufs, pod, c), clk.Now(), "")
				m.imageBackoff.next(string(pod.UID)+"/"+c.Image, clk.Now(), "pull failed")
				m.reasons.set(pod.UID, c.Name, "CrashLoopBackOff", "back-off")
				uids = append(uids, pod.UID)
			}
			if m.crashBackoff.len() != 40 || m.imageBackoff.len() != 40 || len(m.reasons.m) != 40 {
				t.Fatalf("before: %d crash back-offs, %d image back-offs, %d reasons", m.crashBackoff.len(), m.imageBackoff.len(), len(m.reasons.m))
			}
			tc.remove(t, m, uids)
			if n := m.crashBackoff.len() + m.imageBackoff.len(); n != 0 {
				t.Errorf("%d crash and %d image back-offs kept", m.crashBackoff.len(), m.imageBackoff.len())
			}
			if len(m.reasons.m) != tc.wantReasons {
				t.Errorf("%d waiting reasons kept, want %d", len(m.reasons.m), tc.wantReasons)
			}
		})
	}
}
