package nodekit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
)

// An agent on the in-memory fake runtime runs the static pod of a manifest
// directory.
func Example() {
	root, _ := os.MkdirTemp("", "nodekit-example-")
	defer os.RemoveAll(root)
	manifests := filepath.Join(root, "manifests")
	_ = os.Mkdir(manifests, 0o755)
	_ = os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  hostNetwork: true
  containers:
  - {name: httpd, image: "busybox:1", command: [httpd, -f, -p, "8080"]}
`), 0o644)

	agent, err := nodekit.NewBuilder().
		WithNodeName("edge-1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(manifests).
		WithRootDir(root).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go agent.Run(ctx)
	<-agent.Ready()

	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		pods := agent.Pods()
		if len(pods) == 1 {
			st, _ := agent.StatusManager().GetPodStatus(pods[0].UID)
			if st.Phase == v1.PodRunning {
				fmt.Println(pods[0].Namespace+"/"+pods[0].Name, st.Phase, st.ContainerStatuses[0].Name, "ready:", st.ContainerStatuses[0].Ready)
				break
			}
		}
		<-tick.C
	}
	cancel()
	<-agent.Done()
	fmt.Println("stopped:", agent.Err())
	// Output:
	// default/web-edge-1 Running httpd ready: true
	// stopped: <nil>
}

// Build checks every setting and reports all problems at once.
func ExampleBuilder_Build() {
	_, err := nodekit.NewBuilder().WithFakeRuntime().Build()
	fmt.Println(err)
	// Output:
	// nodekit: invalid config: builder: NodeName is required (WithNodeName)
	// nodekit: invalid config: builder: RootDir is required (WithRootDir)
}
