package nodekit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/stats"
)

// TestWithStats: the provider WithStats makes reads the agent's runtime
// and pods: a running static pod is in the summary with its container's
// simulated CPU and memory, and its node fs is the agent's root's.
func TestWithStats(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := t.TempDir()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(agenttest.PodManifest("web", agenttest.Forever)), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := agenttest.NewNameSink()
	var p *stats.Provider
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(root).
		WithStatusSink(sink).
		WithStats(stats.Config{}, &p).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatal("Build made no stats provider")
	}
	stop := agenttest.StartAgent(t, agent)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod Running", func() (bool, string) {
		return sink.Phases()["web-node1"] == v1.PodRunning, ""
	})
	s, err := p.Summary(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.NodeName != "node1" || s.Node.Fs == nil || len(s.Pods) != 1 {
		t.Fatalf("summary node %+v, %d pods", s.Node, len(s.Pods))
	}
	pod := s.Pods[0]
	if pod.PodRef.Name != "web-node1" || len(pod.Containers) != 1 {
		t.Fatalf("pod %+v", pod)
	}
	c := pod.Containers[0]
	if c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 ||
		c.CPU == nil || c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores == 0 {
		t.Errorf("container %s without CPU or memory: %+v %+v", c.Name, c.CPU, c.Memory)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestWithStatsMisuse(t *testing.T) {
	var p *stats.Provider
	_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithStats(stats.Config{}, &p).WithStats(stats.Config{}, &p).WithStats(stats.Config{}, nil).Build()
	if err == nil || !strings.Contains(err.Error(), "WithStats given twice") || !strings.Contains(err.Error(), "out is nil") {
		t.Errorf("Build = %v, want both misuses named", err)
	}
}
