package nodestatus

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/events"
)

type flagPressure struct{ mem, disk, pid atomic.Bool }

func (p *flagPressure) IsUnderMemoryPressure() bool { return p.mem.Load() }
func (p *flagPressure) IsUnderDiskPressure() bool   { return p.disk.Load() }
func (p *flagPressure) IsUnderPIDPressure() bool    { return p.pid.Load() }

// TestNodeEvents: registration records the three "no pressure" events
// (first setting of the conditions) but no NodeReady; then each flip of a
// condition records its event once, a retried update records nothing
// twice, and a new boot ID records Rebooted once.
func TestNodeEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	rec, _ := events.NewFake(events.FakeConfig{Clock: clk})
	sink := newRecordingSink(t)
	ready := &readyFlag{}
	pressure := &flagPressure{}
	var boot atomic.Value
	boot.Store("boot-1")
	setters := []Setter{
		func(_ context.Context, n *v1.Node) error {
			n.Status.NodeInfo.BootID = boot.Load().(string)
			n.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}
			return nil
		},
		MemoryPressureCondition(clk, pressure),
		DiskPressureCondition(clk, pressure),
		PIDPressureCondition(clk, pressure),
		ReadyCondition(clk, ready.check),
	}
	c := newTestController(t, clk, sink, ready, func(cfg *Config) { cfg.Setters, cfg.Recorder = setters, rec })
	ctx := t.Context()
	sync := func() {
		t.Helper()
		clk.Step(10 * time.Second)
		if err := c.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reasons := func() string { return strings.Join(rec.Reasons(), ",") }

	sync()
	if got := reasons(); got != "NodeHasSufficientMemory,NodeHasNoDiskPressure,NodeHasSufficientPID" {
		t.Fatalf("after registration: %s", got)
	}
	for _, e := range rec.Events() {
		if e.Type != v1.EventTypeNormal || e.Object.Kind != "Node" || e.Object.Name != "node-1" || e.Object.UID != "node-1" ||
			e.Message != "Node node-1 status is now: "+e.Reason {
			t.Errorf("event %s %+v", e, e.Object)
		}
	}
	rec.Reset()
	sync() // nothing changed
	if got := reasons(); got != "" {
		t.Fatalf("unchanged status recorded %s", got)
	}

	ready.set(errors.New("runtime down"))
	pressure.mem.Store(true)
	sync()
	if got := reasons(); got != "NodeHasInsufficientMemory,NodeNotReady" {
		t.Fatalf("after pressure and not ready: %s", got)
	}
	rec.Reset()

	// A failing update is retried from the cache: the flip back is
	// recorded once, not once per try.
	ready.set(nil)
	pressure.mem.Store(false)
	pressure.disk.Store(true)
	sink.patchErr = errors.New("api down")
	clk.Step(10 * time.Second)
	if err := c.SyncOnce(ctx); err == nil {
		t.Fatal("no error with the sink failing")
	}
	sink.patchErr = nil
	sync()
	if got := reasons(); got != "NodeHasSufficientMemory,NodeHasDiskPressure,NodeReady" {
		t.Fatalf("after recovery: %s", got)
	}
	rec.Reset()

	boot.Store("boot-2")
	sync()
	sync()
	ev := rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "Rebooted" ||
		ev[0].Message != "Node node-1 has been rebooted, boot id: boot-2" {
		t.Fatalf("after a reboot:\n%s", rec)
	}
}
