package containermgr_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/containermgr"
)

// A Manager on an emulated cgroup v2 root (a temp dir): the pod cgroup of a
// Burstable pod and the node allocatable.
func Example() {
	root, _ := os.MkdirTemp("", "cgroup")
	defer os.RemoveAll(root)
	hundredMi := resource.MustParse("100Mi")
	m, err := containermgr.New(containermgr.Config{
		CgroupRoot:     root,
		CgroupVersion:  containermgr.V2,
		Capacity:       v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
		SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		HardEvictionThresholds: []containermgr.EvictionThreshold{
			{Signal: containermgr.SignalMemoryAvailable, Quantity: &hundredMi},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "1234", Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("256Mi")},
		}}}},
	}
	if err := m.EnsurePodCgroup(context.Background(), pod); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("parent:", m.PodCgroupParent(pod))
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max"} {
		b, _ := os.ReadFile(filepath.Join(root, "kubepods", "burstable", "pod1234", f))
		fmt.Printf("%s: %s\n", f, b)
	}
	mem := m.NodeAllocatable()[v1.ResourceMemory]
	fmt.Println("allocatable memory:", mem.String())
	// Output:
	// parent: /kubepods/burstable/pod1234
	// cpu.weight: 20
	// cpu.max: 100000 100000
	// memory.max: 268435456
	// allocatable memory: 7068Mi
}

// The two spellings of a cgroup name.
func ExampleCgroupName() {
	n, _ := containermgr.NewCgroupName(nil, "kubepods", "burstable", "pod1-2")
	fmt.Println(n.ToCgroupfs())
	fmt.Println(n.ToSystemd())
	back, _ := containermgr.ParseSystemd("kubepods-burstable-pod1_2.slice")
	fmt.Println(back)
	_, err := containermgr.NewCgroupName(nil, "bad_name")
	fmt.Println(err)
	// Output:
	// /kubepods/burstable/pod1-2
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice
	// [kubepods burstable pod1-2]
	// containermgr: invalid cgroup name: part 0 ("bad_name") holds '/', '_' or NUL
}
