package cpumanager_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/topology"
)

func guaranteed(uid, cpu string) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main",
		Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
	p.Name, p.Namespace, p.UID = uid, "default", types.UID("uid-"+uid)
	return p
}

func Example() {
	dir, _ := os.MkdirTemp("", "cpumanager")
	defer os.RemoveAll(dir)
	topo, _ := topology.Synthetic(1, 4, 2, 1) // 8 cpus, core c = {c, c+4}
	mgr, err := cpumanager.New(cpumanager.Config{
		Policy: cpumanager.PolicyStatic, Topology: topo, NumReservedCPUs: 1, StateDir: dir,
	})
	if err != nil {
		panic(err)
	}
	if err := mgr.Start(context.Background(), nil); err != nil {
		panic(err)
	}
	fmt.Println("reserved:", mgr.ReservedCPUs())

	web := guaranteed("web", "2")
	ok, _, _ := mgr.Admit(web, nil)
	cpus, exclusive := mgr.GetCPUSet(string(web.UID), "main")
	fmt.Println("web admitted:", ok, "cpus:", cpus, "exclusive:", exclusive)
	fmt.Println("shared pool:", mgr.DefaultCPUSet())

	ok, reason, msg := mgr.Admit(guaranteed("big", "6"), nil)
	fmt.Println("big admitted:", ok, reason)
	fmt.Println(msg)

	_ = mgr.RemovePod(string(web.UID))
	fmt.Println("after web ends:", mgr.DefaultCPUSet())
	// Output:
	// reserved: 0
	// web admitted: true cpus: 1,5 exclusive: true
	// shared pool: 0,2-4,6-7
	// big admitted: false UnexpectedAdmissionError
	// Allocate failed due to container "main" of pod default/big: cpumanager: not enough cpus available to satisfy request: requested=6, available=5, which is unexpected
	// after web ends: 0-7
}
