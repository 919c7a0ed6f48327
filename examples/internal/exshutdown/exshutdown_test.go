package exshutdown_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
)

// A SIGTERM shuts the node down (the pod ends Failed/Terminated) and then
// stops the agent.
func TestRunOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	manifest := `{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"},
  "spec": {"containers": [{"name": "web", "image": "busybox", "command": ["sleep", "infinity"]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "web.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	b := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime("busybox").WithManifestDir(dir).WithRootDir(filepath.Join(dir, "root"))
	f := exshutdown.Flags{GracePeriod: 20 * time.Second, OnSIGTERM: true}
	h, err := f.Wire(b, agentshutdown.Config{})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	term := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- exshutdown.RunOn(t.Context(), h, nil, term, agent.Run) }()
	if _, _, err := agent.WaitForPod(t.Context(), "default", "web-n", nodekit.PodRunning); err != nil {
		t.Fatal(err)
	}
	term <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop after the shutdown")
	}
	pod, ok := agent.PodByName("default", "web-n")
	if !ok {
		t.Fatal("pod gone")
	}
	st, _ := agent.PodStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "Terminated" {
		t.Errorf("pod %s/%s after the SIGTERM, want Failed/Terminated", st.Phase, st.Reason)
	}
}
