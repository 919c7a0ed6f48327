//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
)

type phaseSink struct {
	mu    sync.Mutex
	phase map[string]v1.PodPhase
}

func (s *phaseSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase[pod.Name] = st.Phase
	return nil
}

func (s *phaseSink) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.phase {
		if p == v1.PodRunning {
			n++
		}
	}
	return n
}

// TestAgentInProcess runs the Agent as a library against containerd:
// three pods start, the agent stops cleanly (nil, no goroutine left, the
// gRPC connection closed) and the pods keep running until removed.
func TestAgentInProcess(t *testing.T) {
	e := setup(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { e.cleanup(t) })
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		writeManifest(t, manifests, podName(i), manifest(podName(i), e.busybox, "1"))
	}
	sink := &phaseSink{phase: map[string]v1.PodPhase{}}
	agent, err := nodekit.NewBuilder().
		WithNodeName(nodeName).
		WithRuntimeEndpoint(e.endpoint).
		WithManifestDir(manifests).
		WithRootDir(dir).
		WithStatusSink(sink).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go agent.Run(ctx)
	waitFor(t, 60*time.Second, "3 pods Running", func() (bool, string) {
		n := sink.running()
		return n == 3 && len(e.running(t)) == 3, fmt.Sprintf("%d Running in the sink, %d in containerd", n, len(e.running(t)))
	})
	cancel()
	select {
	case <-agent.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of the cancel")
	}
	if err := agent.Err(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if n := len(e.running(t)); n != 3 {
		t.Errorf("%d containers run after the agent stopped, want 3 (it is not a supervisor)", n)
	}
}
