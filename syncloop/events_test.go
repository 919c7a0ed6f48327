package syncloop

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/podworkers"
)

// TestLoopEvents: an admission rejection is recorded on the pod with the
// handler's reason (OutOfcpu) and message, a failed mount as FailedMount
// "Unable to attach or mount volumes: ...", and a failed container GC as
// ContainerGCFailed on the node.
func TestLoopEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	rec, _ := events.NewFake(events.FakeConfig{Clock: clk})
	h := &ltHooks{fail: "mount"}
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) {
		c.Recorder, c.NodeName = rec, "node-1"
		c.Volumes, c.Cgroups, c.Probes = h, h, h
		c.Root = t.TempDir()
		c.NodeAllocatable = func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("10")}
		}
	})
	big := ltPod("big", "big", 0, v1.Container{Name: "c", Image: "i", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}})
	l.HandlePodAdditions([]*v1.Pod{big})
	st, _ := l.StatusManager().GetPodStatus("big")
	ev := rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "OutOfcpu" || ev[0].Object.UID != "big" ||
		RejectedMessagePrefix+ev[0].Message != st.Message {
		t.Fatalf("rejection events (status %q):\n%s", st.Message, rec)
	}

	rec.Reset()
	pod := ltPod("1", "web", 0)
	if _, err := l.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil); !errors.Is(err, ErrHook) {
		t.Fatalf("SyncPod with a failing mount: %v", err)
	}
	ev = rec.Events()
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "FailedMount" ||
		ev[0].Message != "Unable to attach or mount volumes: mount failed" || ev[0].Object.UID != "1" || ev[0].Object.FieldPath != "" {
		t.Fatalf("mount events:\n%s", rec)
	}

	rec.Reset()
	stub.gcErr = errors.New("runtime down")
	l.cfg.SourcesReady = func() bool { return true }
	_ = l.HandlePodCleanups(t.Context())
	ev = rec.WithReason("ContainerGCFailed")
	if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Message != "runtime down" ||
		ev[0].Object.Kind != "Node" || ev[0].Object.Name != "node-1" {
		t.Fatalf("GC events:\n%s", rec)
	}
}
