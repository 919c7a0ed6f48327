package eviction

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
)

// TestEvictionEvents: a hard memory threshold records EvictionThresholdMet
// on the node ("Attempting to reclaim memory") and Evicted on the evicted
// pod with the message naming the resource, the threshold and the usage.
func TestEvictionEvents(t *testing.T) {
	rec := &events.Fake{}
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	bu := mkPod("burstable", 0, "100Mi", "")
	h := newHarness(t, ts, []*v1.Pod{bu}, Config{Recorder: rec, NodeName: "node-1"})
	h.stats.s = memSummary(3000, map[string]uint64{"burstable": 400})
	h.sync(t)
	if n := len(rec.Events()); n != 0 {
		t.Fatalf("events without pressure:\n%s", rec)
	}
	h.clock.Step(time.Minute)
	h.stats.s = memSummary(800, map[string]uint64{"burstable": 400})
	if got := h.sync(t); names(got) != "burstable" {
		t.Fatalf("evicted %v", names(got))
	}
	ev := rec.Events()
	if len(ev) != 2 {
		t.Fatalf("events:\n%s", rec)
	}
	met, evicted := ev[0], ev[1]
	if met.Type != v1.EventTypeWarning || met.Reason != "EvictionThresholdMet" || met.Message != "Attempting to reclaim memory" ||
		met.Object.Kind != "Node" || met.Object.Name != "node-1" {
		t.Errorf("threshold event %s %+v", met, met.Object)
	}
	want := "The node was low on resource: memory. Threshold quantity: 1Gi, available: 800Mi. Container c was using 400Mi, request is 100Mi, has larger consumption of memory. "
	if evicted.Type != v1.EventTypeWarning || evicted.Reason != "Evicted" || evicted.Message != want ||
		evicted.Object.Kind != "Pod" || evicted.Object.UID != bu.UID || evicted.Object.FieldPath != "" {
		t.Errorf("evicted event %s %+v\nwant message %q", evicted, evicted.Object, want)
	}
	if h.kills[0].status.Message != evicted.Message {
		t.Errorf("event message differs from the status message %q", h.kills[0].status.Message)
	}
}

// TestLocalStorageEvictionEvent: a pod evicted over a local storage limit
// gets the Evicted event with the status's message, as the kubelet's
// evictPod records it for every eviction.
func TestLocalStorageEvictionEvent(t *testing.T) {
	rec := &events.Fake{}
	h := newHarness(t, nil, []*v1.Pod{lsPod("emptydir", "1Mi", "100Mi")}, Config{Recorder: rec, NodeName: "node-1"})
	h.stats.s = &Summary{Pods: []PodStats{lsStats("emptydir", 2, [2]uint64{0, 0})}}
	if got := h.sync(t); names(got) != "emptydir" {
		t.Fatalf("evicted %v", names(got))
	}
	ev := rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "Evicted" ||
		ev[0].Message != h.kills[0].status.Message || ev[0].Object.Name != "emptydir" {
		t.Fatalf("events:\n%s\nwant one Evicted with %q", rec, h.kills[0].status.Message)
	}
}
