// Command minimal is the smallest useful nodekit program: an agent on the
// in-memory fake runtime runs the static pod of a manifest directory, waits
// for it to run, prints its status and stops. README.md shows this file.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit"
)

const manifest = `{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"},
  "spec": {"containers": [{"name": "web", "image": "busybox", "command": ["httpd", "-f"]}]}}`

func main() {
	dir, err := os.MkdirTemp("", "nodekit-minimal-")
	must(err)
	defer os.RemoveAll(dir)
	must(os.WriteFile(filepath.Join(dir, "web.json"), []byte(manifest), 0o600))
	agent, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox").
		WithManifestDir(dir).WithRootDir(filepath.Join(dir, "root")).Build()
	must(err)
	ctx, stop := context.WithCancel(context.Background())
	go agent.Run(ctx) //nolint:errcheck // its result is read from agent.Err below
	_, status, err := agent.WaitForPod(ctx, "default", "web-node1", nodekit.PodRunning)
	must(err)
	fmt.Println("web-node1:", status.Phase, "running:", status.ContainerStatuses[0].State.Running != nil)
	stop()
	<-agent.Done()
	fmt.Println("agent stopped, error:", agent.Err())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
