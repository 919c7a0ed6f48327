package nodekit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
)

// setSource sends one SET of pods and waits for the end.
type setSource struct {
	out  chan<- kubetypes.PodUpdate
	pods []*v1.Pod
}

func (s setSource) Run(ctx context.Context) error {
	select {
	case s.out <- kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceAPI, Pods: s.pods}:
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

func TestWithCluster(t *testing.T) {
	defer goleak.VerifyNone(t)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{NodeName: "n", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	sink := podstatus.NewMemorySink()
	var started, stopped atomic.Int32
	var sawAgent atomic.Bool
	agent, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime("busybox").WithRootDir(t.TempDir()).
		WithCluster(nodekit.Cluster{
			PodSource: func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return setSource{out: out, pods: []*v1.Pod{pod}}, nil
			},
			StatusSink: sink,
			Parts: func(a *nodekit.Agent) ([]nodekit.ClusterPart, error) {
				sawAgent.Store(a != nil && a.Loop() != nil)
				return []nodekit.ClusterPart{{Name: "node status", Run: func(ctx context.Context) error {
					started.Add(1)
					<-ctx.Done()
					stopped.Add(1)
					return nil
				}}}, nil
			},
		}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if !sawAgent.Load() {
		t.Fatal("Parts did not get the built agent")
	}
	if agent.StatusSink() != sink {
		t.Fatal("the cluster's status sink is not used")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	agenttest.WaitUntil(t, 10*time.Second, sink.Changed(), "pod from the api source running", func() (bool, string) {
		st, ok := sink.Get("uid-web")
		return ok && st.Phase == v1.PodRunning && started.Load() == 1, string(st.Phase)
	})
	if got := agent.Pods(); len(got) != 1 || got[0].Annotations[kubetypes.ConfigSourceAnnotation] != kubetypes.SourceAPI {
		t.Fatalf("pods = %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if stopped.Load() != 1 {
		t.Fatal("cluster part not stopped")
	}
}

func TestWithClusterErrors(t *testing.T) {
	build := func(c nodekit.Cluster, sink podstatus.Sink) (*nodekit.Agent, error) {
		b := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir())
		if sink != nil {
			b.WithStatusSink(sink)
		}
		return b.WithCluster(c).Build()
	}
	src := func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) { return setSource{out: out}, nil }
	if _, err := build(nodekit.Cluster{}, nil); !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "PodSource") {
		t.Fatalf("no source: %v", err)
	}
	boom := errors.New("boom")
	_, err := build(nodekit.Cluster{PodSource: src, Parts: func(*nodekit.Agent) ([]nodekit.ClusterPart, error) { return nil, boom }}, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("parts error: %v", err)
	}
	_, err = build(nodekit.Cluster{PodSource: src, Parts: func(*nodekit.Agent) ([]nodekit.ClusterPart, error) {
		return []nodekit.ClusterPart{{Name: "x"}}, nil
	}}, nil)
	if !errors.Is(err, nodekit.ErrInvalidConfig) {
		t.Fatalf("part without run: %v", err)
	}
	// A sink given before WithCluster wins.
	mine := podstatus.NewMemorySink()
	a, err := build(nodekit.Cluster{PodSource: src, StatusSink: podstatus.NewMemorySink()}, mine)
	if err != nil {
		t.Fatal(err)
	}
	if a.StatusSink() != mine {
		t.Fatal("WithStatusSink's sink was replaced")
	}
}
