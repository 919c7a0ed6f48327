package nodekit_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
)

// evPod is one host-network pod that must not be restarted.
func evPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-web"),
			Annotations: map[string]string{"kubernetes.io/config.source": "test"}},
		Spec: v1.PodSpec{
			HostNetwork: true, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "main", Image: "busybox:1"}},
		},
	}
}

func evAgent(t *testing.T, evented bool) (*nodekit.Agent, *statusSink) {
	t.Helper()
	sink := &statusSink{st: map[string]v1.PodStatus{}}
	b := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return &onePodSource{out: out, pods: []*v1.Pod{evPod()}}, nil
		})
	if evented {
		b.WithEventedPLEG()
	}
	a, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return a, sink
}

// With WithEventedPLEG on a runtime with container events, a container's
// exit reaches the status sink well within the relist period (1s), which
// the evented PLEG stretches to 300s: it came from the event stream.
func TestEventedPLEGExitWithoutRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, sink := evAgent(t, true)
		if a.EventedPLEG() == nil || a.PLEG() != a.EventedPLEG().Generic() {
			t.Fatal("WithEventedPLEG on the fake runtime made no EventedPLEG")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		waitFor := func(what string, limit, step time.Duration, cond func(v1.PodStatus) bool) {
			t.Helper()
			for waited := time.Duration(0); ; waited += step {
				synctest.Wait()
				if cond(sink.get("web")) {
					return
				}
				if waited > limit {
					t.Fatalf("%s: not within %v: %+v", what, limit, sink.get("web"))
				}
				<-time.After(step)
			}
		}
		running := func(st v1.PodStatus) bool {
			return st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil
		}
		waitFor("Running", 10*time.Second, 100*time.Millisecond, running)
		if !a.EventedPLEG().InUse() {
			t.Fatal("the evented PLEG does not follow container events")
		}
		cs, err := a.FakeRuntime().ListContainers(ctx, &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil || len(cs) != 1 {
			t.Fatalf("running containers: %v %v", cs, err)
		}
		if err := a.FakeRuntime().ExitContainer(cs[0].Id, 3, "Error"); err != nil {
			t.Fatal(err)
		}
		waitFor("exit in status", 300*time.Millisecond, 10*time.Millisecond, func(st v1.PodStatus) bool {
			return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Terminated != nil &&
				st.ContainerStatuses[0].State.Terminated.ExitCode == 3
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Without the option the agent relists with a GenericPLEG only.
func TestEventedPLEGOffByDefault(t *testing.T) {
	a, _ := evAgent(t, false)
	if a.EventedPLEG() != nil || a.PLEG() == nil {
		t.Fatalf("evented %v generic %v", a.EventedPLEG(), a.PLEG())
	}
}

// A runtime reached over the CRI gets an EventedPLEG by default (it falls
// back to relisting at run time when the runtime lacks container events);
// WithRelistPLEG turns it off.
func TestEventedPLEGDefaultForRemoteRuntime(t *testing.T) {
	build := func(relist bool) *nodekit.Agent {
		b := nodekit.NewBuilder().WithNodeName("n").WithRootDir(t.TempDir()).
			WithRuntimeEndpoint("unix://" + filepath.Join(t.TempDir(), "none.sock"))
		if relist {
			b.WithRelistPLEG()
		}
		a, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := build(false); a.EventedPLEG() == nil || a.PLEG() != a.EventedPLEG().Generic() {
		t.Fatal("a remote runtime got no EventedPLEG by default")
	}
	if a := build(true); a.EventedPLEG() != nil || a.PLEG() == nil {
		t.Fatalf("WithRelistPLEG: evented %v generic %v", a.EventedPLEG(), a.PLEG())
	}
}
