package agentserver_test

import (
	"fmt"
	"os"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentserver"
	"github.com/nodekit/nodekit/server"
)

// Wire adds the API as a part of the agent; a bad server config fails Build.
func Example() {
	root, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(root)
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(root)
	agentserver.Wire(b, agentserver.Config{Server: server.Config{NodeName: "node1", CertDir: root}})
	_, err := b.Build()
	fmt.Println(err != nil)
	// Output:
	// true
}
