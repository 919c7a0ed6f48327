package prober

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
)

// TestProbeEvents: every failed probe records Unhealthy "<Type> probe
// failed: <output>" on the container (not only the one that crosses the
// threshold), an errored probe "... errored and resulted in unknown
// state", an HTTP probe that ended on another host's redirect a
// ProbeWarning, and a plain success nothing.
func TestProbeEvents(t *testing.T) {
	e := newEnv(t)
	rec, _ := events.NewFake(events.FakeConfig{Clock: e.clk})
	e.m.rec = rec
	p := execProbe()
	p.FailureThreshold = 3
	pod := testPod(Readiness, p)
	w := e.workerFor(Readiness, pod)
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	ctx := t.Context()

	set := func(r Result, out string, err error) {
		e.probe.mu.Lock()
		e.probe.r, e.probe.out, e.probe.err = r, out, err
		e.probe.mu.Unlock()
	}
	set(Success, "ok", nil)
	w.doProbe(ctx)
	set(Failure, "connection refused", nil)
	w.doProbe(ctx)
	w.doProbe(ctx)
	set(Unknown, "", errors.New("exec: runtime gone"))
	w.doProbe(ctx)
	set(Success, redirectWarning+", Response body: moved", nil)
	w.doProbe(ctx)

	wants := []struct{ typ, reason, msg string }{
		{v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: connection refused"},
		{v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: connection refused"},
		{v1.EventTypeWarning, "Unhealthy", "Readiness probe errored and resulted in unknown state: exec: runtime gone"},
		{v1.EventTypeWarning, "ProbeWarning", "Readiness probe warning: Probe terminated redirects, Response body: moved"},
	}
	got := rec.Events()
	if len(got) != len(wants) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(wants), rec)
	}
	for i, w := range wants {
		g := got[i]
		if g.Type != w.typ || g.Reason != w.reason || g.Message != w.msg ||
			g.Object.UID != testUID || g.Object.FieldPath != "spec.containers{app}" || g.Object.Kind != "Pod" {
			t.Errorf("event %d: %s %+v, want %s %s %s", i, g, g.Object, w.typ, w.reason, w.msg)
		}
	}
}
