package containerdwire_test

import (
	"fmt"
	"os"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containerdwire"
	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
)

// An agent on containerd that follows its task events; Build makes the
// watcher (and connects nothing: the agent does when it runs). Without an
// endpoint (here: a fake runtime and none given) Build says so.
func Example() {
	root, err := os.MkdirTemp("", "containerdwire-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	var w *containerdevents.Watcher
	b := nodekit.NewBuilder().WithNodeName("node1").WithRootDir(root).
		WithRuntimeEndpoint("unix:///run/containerd/containerd.sock")
	_, err = containerdwire.Events(b, "", &w).Build()
	fmt.Println("built:", err, "watcher:", w != nil)

	fake := nodekit.NewBuilder().WithNodeName("node1").WithRootDir(root).WithFakeRuntime()
	_, err = containerdwire.Events(fake, "", nil).Build()
	fmt.Println(err)
	// Output:
	// built: <nil> watcher: true
	// nodekit: invalid config: containerd events: containerdevents: no endpoint given and no WithRuntimeEndpoint
}
