package cmwire_test

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
)

// A nil manager, a second call and a container manager with WithCgroups
// are misuses Build reports, each naming the call.
func TestMisuse(t *testing.T) {
	cm, err := containermgr.New(containermgr.Config{
		CgroupRoot: t.TempDir(), CgroupVersion: containermgr.V2,
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	builder := func() *nodekit.Builder {
		return nodekit.NewBuilder().WithNodeName("n").WithRootDir(t.TempDir()).WithFakeRuntime()
	}
	for _, tc := range []struct {
		name string
		b    *nodekit.Builder
		want string
	}{
		{"nil container manager", cmwire.ContainerManager(builder(), nil), "cmwire.ContainerManager: was given a nil manager"},
		{"nil cpu manager", cmwire.CPUManager(builder(), nil), "cmwire.CPUManager: was given a nil manager"},
		{"nil memory manager", cmwire.MemoryManager(builder(), nil), "cmwire.MemoryManager: was given a nil manager"},
		{"twice", cmwire.ContainerManager(cmwire.ContainerManager(builder(), cm), cm), "cmwire.ContainerManager given twice"},
		{"with WithCgroups", cmwire.ContainerManager(builder().WithCgroups(nil, cm), cm), "cmwire.ContainerManager and WithCgroups both given"},
	} {
		_, err := tc.b.Build()
		if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
