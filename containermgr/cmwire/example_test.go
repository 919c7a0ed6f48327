package cmwire_test

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
)

// An agent whose pods get cgroups under an emulated cgroup v2 hierarchy,
// with the pods' requests checked against the node's allocatable
// resources. Build reports a misuse (the manager given twice) with the
// rest.
func Example() {
	root, err := os.MkdirTemp("", "cmwire-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	cm, err := containermgr.New(containermgr.Config{
		CgroupRoot:    filepath.Join(root, "cgroup"),
		CgroupVersion: containermgr.V2,
		Capacity:      v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
	})
	if err != nil {
		panic(err)
	}
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox").WithRootDir(filepath.Join(root, "agent"))
	agent, err := cmwire.ContainerManager(b, cm).Build()
	fmt.Println("built:", agent != nil, err)

	twice := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox").WithRootDir(filepath.Join(root, "agent"))
	_, err = cmwire.ContainerManager(cmwire.ContainerManager(twice, cm), cm).Build()
	fmt.Println(err)
	// Output:
	// built: true <nil>
	// nodekit: invalid config: builder: cmwire.ContainerManager given twice
}
