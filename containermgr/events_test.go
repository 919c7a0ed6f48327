package containermgr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
)

// TestAllocatableEvents: a failed try to set the allocatable limit records
// FailedNodeAllocatableEnforcement on the node, the retry that succeeds
// NodeAllocatableEnforced ("Updated Node Allocatable limit across pods"),
// given through UseEventRecorder as the Builder does.
func TestAllocatableEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := v1Root(t)
		block := filepath.Join(root, "memory", "kubepods", "memory.limit_in_bytes")
		if err := os.MkdirAll(block, 0o755); err != nil { // a directory: the write fails
			t.Fatal(err)
		}
		rec := &events.Fake{}
		m := newTestManager(t, root, V1, nil)
		m.UseEventRecorder(rec, "node-1")
		m.UseEventRecorder(&events.Fake{}, "other") // the first one stays
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		ev := rec.Events()
		if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "FailedNodeAllocatableEnforcement" ||
			!strings.HasPrefix(ev[0].Message, `Failed to update Node Allocatable Limits "`) || ev[0].Object.Name != "node-1" {
			t.Fatalf("after a failed try:\n%s", rec)
		}
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
		<-time.After(DefaultQOSUpdatePeriod + time.Second)
		synctest.Wait()
		ev = rec.Events()
		if len(ev) != 2 || ev[1].Type != v1.EventTypeNormal || ev[1].Reason != "NodeAllocatableEnforced" ||
			ev[1].Message != "Updated Node Allocatable limit across pods" || ev[1].Object.Kind != "Node" {
			t.Fatalf("after the retry:\n%s", rec)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
