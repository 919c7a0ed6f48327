package clusterapiserver_test

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
)

// Wire joins a Builder to an API server; run the agent with agent.Run(ctx).
func ExampleWire() {
	dir, _ := os.MkdirTemp("", "nodekit-example")
	defer os.RemoveAll(dir)
	client := fake.NewClientset() // kubernetes.NewForConfig(restConfig) in a real agent
	b := nodekit.NewBuilder().WithFakeRuntime().WithRootDir(dir)
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: "node-1"}).Build()
	fmt.Println(agent != nil, err)

	_, err = clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(dir), clusterapiserver.Config{NodeName: "node-1"}).Build()
	fmt.Println(errors.Is(err, clusterapiserver.ErrInvalidConfig))
	// Output:
	// true <nil>
	// true
}
