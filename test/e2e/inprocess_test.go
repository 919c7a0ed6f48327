//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestAgentInProcess runs the Agent as a library against containerd:
// three pods start, the agent stops cleanly (nil, no goroutine left, the
// gRPC connection closed) and the pods keep running until removed.
func TestAgentInProcess(t *testing.T) {
	e := setup(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { e.cleanup(t) })
	dir, manifests := agentDirs(t)
	for i := range 3 {
		writeManifest(t, manifests, podName(i), manifest(podName(i), e.busybox, "1"))
	}
	sink := newStatusSink()
	agent, err := e.builder(dir, manifests).WithStatusSink(sink).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, agent, 30*time.Second)
	waitFor(t, 60*time.Second, "3 pods Running", func() (bool, string) {
		n := sink.running()
		return n == 3 && len(e.running(t)) == 3, fmt.Sprintf("%d Running in the sink, %d in containerd", n, len(e.running(t)))
	})
	stop()
	if n := len(e.running(t)); n != 3 {
		t.Errorf("%d containers run after the agent stopped, want 3 (it is not a supervisor)", n)
	}
}
