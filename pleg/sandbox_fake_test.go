package pleg_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/runtimetest"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
)

type seen struct {
	typ     kubetypes.EventType
	id      string
	sandbox bool
}

func drain(g interface {
	Watch() <-chan *kubetypes.PodLifecycleEvent
}) []seen {
	var out []seen
	for len(g.Watch()) > 0 {
		e := <-g.Watch()
		id, _ := e.Data.(string)
		out = append(out, seen{e.Type, id, e.Sandbox})
	}
	return out
}

func countOf(evs []seen, want seen) int {
	n := 0
	for _, e := range evs {
		if e == want {
			n++
		}
	}
	return n
}

// A pod run on the fake with runtimetest.RunPod, relisted by a GenericPLEG:
// the sandbox's events say Sandbox, the containers' do not.
func TestEventsSaySandboxOnFakeRuntime(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: rt, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	g, err := pleg.New(pleg.Config{Runtime: m, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}
	st, err := runtimetest.RunPod(ctx, rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	sb, ctr := st.SandboxStatuses[0].GetId(), st.ContainerStatuses[0].ID
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	evs := drain(g)
	if len(evs) != 2 || countOf(evs, seen{kubetypes.ContainerStarted, sb, true}) != 1 || countOf(evs, seen{kubetypes.ContainerStarted, ctr, false}) != 1 {
		t.Fatalf("events after the start = %+v, want ContainerStarted for sandbox %s (Sandbox) and container %s", evs, sb, ctr)
	}

	if err := rt.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	evs = drain(g)
	if len(evs) != 2 || countOf(evs, seen{kubetypes.ContainerDied, sb, true}) != 1 || countOf(evs, seen{kubetypes.ContainerDied, ctr, false}) != 1 {
		t.Fatalf("events after the stop = %+v, want ContainerDied for both, Sandbox only on %s", evs, sb)
	}

	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	evs = drain(g)
	if len(evs) != 2 || countOf(evs, seen{kubetypes.ContainerRemoved, sb, true}) != 1 || countOf(evs, seen{kubetypes.ContainerRemoved, ctr, false}) != 1 {
		t.Fatalf("events after the removal = %+v, want ContainerRemoved for both, Sandbox only on %s", evs, sb)
	}
}

// The evented PLEG marks the events of a sandbox's CRI events the same way.
func TestEventedEventsSaySandbox(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: rt, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	e, err := pleg.NewEvented(pleg.EventedConfig{Config: pleg.Config{Runtime: m, Clock: fc}, Events: rt})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}
	st, err := runtimetest.RunPod(ctx, rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	sbStatus := st.SandboxStatuses[0]
	ctr := st.ContainerStatuses[0].ID
	at := fc.Now().UnixNano()
	for i, id := range []string{sbStatus.GetId(), ctr} {
		ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
			CreatedAt: at + int64(i) + 1, PodSandboxStatus: sbStatus}
		if err := e.HandleEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	evs := drain(e)
	want := []seen{{kubetypes.ContainerStarted, sbStatus.GetId(), true}, {kubetypes.ContainerStarted, ctr, false}}
	if len(evs) != 2 || evs[0] != want[0] || evs[1] != want[1] {
		t.Fatalf("events = %+v, want %+v", evs, want)
	}
}
