package memorymanager_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/containermgr/memorymanager"
)

func Example() {
	dir, _ := os.MkdirTemp("", "memorymanager")
	defer os.RemoveAll(dir)
	gib := uint64(1 << 30)
	mgr, err := memorymanager.New(memorymanager.Config{
		Policy: memorymanager.PolicyStatic,
		Machine: []memorymanager.NUMANode{
			{ID: 0, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: 4 * gib}},
			{ID: 1, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: 4 * gib}},
		},
		// system-reserved + kube-reserved + hard eviction = 1Gi, kept on node 0.
		NodeAllocatableReservation: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		ReservedMemory: []memorymanager.Reservation{
			{NUMANode: 0, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}},
		},
		StateDir: dir,
	})
	if err != nil {
		panic(err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		panic(err)
	}
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("3500Mi")}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "db",
		Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
	pod.Name, pod.Namespace, pod.UID = "db", "default", "uid-db"

	ok, _, _ := mgr.Admit(pod, nil)
	b := mgr.Blocks("uid-db", "db")
	fmt.Println("admitted:", ok, "NUMA nodes:", b[0].NUMAAffinity, "bytes:", b[0].Size)
	fmt.Println("free MiB on node 0:", mgr.Free()[0][v1.ResourceMemory]>>20, "node 1:", mgr.Free()[1][v1.ResourceMemory]>>20)
	// Output:
	// admitted: true NUMA nodes: [1] bytes: 3670016000
	// free MiB on node 0: 3072 node 1: 596
}
