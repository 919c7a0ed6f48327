package agentshutdown_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/nodeshutdown"
)

// The embedding program shuts the node down before it powers off: the
// pod is killed within the budget and the agent refuses new pods.
func Example() {
	root, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(root)
	manifest := `{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"},
  "spec": {"containers": [{"name": "web", "image": "busybox", "command": ["sleep", "infinity"]}]}}`
	_ = os.MkdirAll(filepath.Join(root, "manifests"), 0o700)
	_ = os.WriteFile(filepath.Join(root, "manifests", "web.json"), []byte(manifest), 0o600)
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox").
		WithManifestDir(filepath.Join(root, "manifests")).WithRootDir(filepath.Join(root, "root"))
	sd := agentshutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{
		GracePeriod: 20 * time.Second, GracePeriodCriticalPods: 5 * time.Second,
	}})
	agent, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer func() { stop(); <-agent.Done() }()
	go agent.Run(ctx) //nolint:errcheck // read from agent.Err
	if _, _, err := agent.WaitForPod(ctx, "default", "web-node1", nodekit.PodRunning); err != nil {
		fmt.Println(err)
		return
	}
	if err := sd.Shutdown(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, st, _ := agent.WaitForPod(ctx, "default", "web-node1", nodekit.PodPhase("Failed"))
	fmt.Println(st.Phase, st.Reason, st.Message)
	fmt.Println("ready:", agent.NodeReadyChecks()[0]())
	// Output:
	// Failed Terminated Pod was terminated in response to imminent node shutdown.
	// ready: node is shutting down
}
