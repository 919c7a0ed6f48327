package imagegc_test

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/eviction/imagegc"
)

// TestImageGCFailedEvent: as the kubelet, a failed collection is recorded
// as ImageGCFailed on the node only when the one before failed too; a
// success in between starts the count again.
func TestImageGCFailedEvent(t *testing.T) {
	clk := start()
	rec := &events.Fake{}
	f := &images{capacity: 1000, available: 900}
	f.add("sha256:a", 100)
	m := newManager(t, f, clk, func(c *imagegc.Config) { c.Recorder, c.NodeName = rec, "node-1" })
	f.listErr = errors.New("runtime down")
	m.Collect(t.Context())
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("first failure recorded:\n%s", rec)
	}
	m.Collect(t.Context())
	ev := rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "ImageGCFailed" ||
		ev[0].Object.Kind != "Node" || ev[0].Object.Name != "node-1" || ev[0].Message == "" {
		t.Fatalf("after two failures:\n%s", rec)
	}
	f.listErr = nil
	m.Collect(t.Context())
	f.listErr = errors.New("runtime down")
	m.Collect(t.Context())
	if n := len(rec.Events()); n != 1 {
		t.Fatalf("a failure after a success recorded:\n%s", rec)
	}
}
