package containerdwire_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containerdwire"
	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
	"github.com/nodekit/nodekit/kubetypes"
)

func TestEventsNeedsAnEndpoint(t *testing.T) {
	_, err := containerdwire.Events(nodekit.NewBuilder().WithNodeName("n").WithRootDir(t.TempDir()).WithFakeRuntime(), "", nil).
		Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "containerdevents") {
		t.Fatalf("Build: %v", err)
	}
	_, err = containerdwire.Events(nodekit.NewBuilder().WithNodeName("n").WithRootDir(t.TempDir()).WithFakeRuntime(), "tcp://1.2.3.4:5", nil).
		Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "Endpoint") {
		t.Fatalf("Build: %v", err)
	}
}

// firstExitSink remembers the first terminated state of every pod's
// container.
type firstExitSink struct {
	mu      sync.Mutex
	running map[string]bool
	exit    map[string]*v1.ContainerStateTerminated
}

func (s *firstExitSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running != nil {
			s.running[pod.Name] = true
		}
		if cs.State.Terminated != nil && s.exit[pod.Name] == nil {
			s.exit[pod.Name] = cs.State.Terminated.DeepCopy()
		}
	}
	return nil
}

func (s *firstExitSink) get(name string) (bool, *v1.ContainerStateTerminated) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[name], s.exit[name]
}

// An exit from containerd's events reaches the pod status although the
// runtime still runs the container and the agent relists only every 10
// minutes; the agent's Run joins the watcher (which here only backs off:
// nothing listens at its endpoint).
func TestContainerdEventExitWithoutRelist(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sink := &firstExitSink{running: map[string]bool{}, exit: map[string]*v1.ContainerStateTerminated{}}
	var watcher *containerdevents.Watcher
	b := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).
		WithStatusSink(sink)
	a, err := containerdwire.Events(b, filepath.Join(t.TempDir(), "no-containerd.sock"), &watcher).
		WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return &onePodSource{out: out, pods: []*v1.Pod{evPod()}}, nil
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if watcher == nil {
		t.Fatal("no watcher")
	}
	a.PLEG().SetRelistPeriod(10*time.Minute, 20*time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of the cancel")
		}
	}()
	poll := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for !cond() {
			select {
			case <-deadline:
				t.Fatalf("%s: not within 10s", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	poll("Running", func() bool { r, _ := sink.get("web"); return r })
	cs, err := a.FakeRuntime().ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("running containers: %v %v", cs, err)
	}
	finished := time.Now().Add(-time.Millisecond).Truncate(time.Second)
	containerdwire.Handler(a.PLEG())(ctx, containerdevents.Event{
		Type: containerdevents.Exit, ContainerID: cs[0].Id, ExitCode: 137, FinishedAt: finished, OOMKilled: true,
	})
	poll("terminated", func() bool { _, x := sink.get("web"); return x != nil })
	_, x := sink.get("web")
	if x.ExitCode != 137 || x.Reason != "OOMKilled" || !x.FinishedAt.Time.Equal(finished) {
		t.Fatalf("first terminated state %+v, want exit 137 OOMKilled at %v", x, finished)
	}
}
