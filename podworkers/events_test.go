package podworkers

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
)

// TestKillTimeoutRecordsExceededGracePeriod: a kill the runtime does not
// finish in time records ExceededGracePeriod on the pod, as the kubelet's
// killPodNow; a kill that finishes records nothing.
func TestKillTimeoutRecordsExceededGracePeriod(t *testing.T) {
	rec := &events.Fake{}
	withWorkers(t, Config{Recorder: rec}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.syncer.blockOn("terminating", "1")
		if err := e.p.KillPodAndWait(t.Context(), newPod("1", "web"), false, i64(2), nil); !errors.Is(err, ErrKillTimeout) {
			t.Fatalf("err %v", err)
		}
	})
	ev := rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "ExceededGracePeriod" ||
		ev[0].Message != "Container runtime did not kill the pod within specified grace period." || ev[0].Object.UID != "1" {
		t.Fatalf("events:\n%s", rec)
	}
	rec.Reset()
	withWorkers(t, Config{Recorder: rec}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("2", "db"))
		if err := e.p.KillPodAndWait(t.Context(), newPod("2", "db"), false, i64(2), nil); err != nil {
			t.Fatal(err)
		}
	})
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("a kill in time recorded:\n%s", rec)
	}
}
