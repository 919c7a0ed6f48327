package topology_test

import (
	"fmt"

	"github.com/nodekit/nodekit/containermgr/topology"
)

func Example() {
	topo, err := topology.Synthetic(2, 4, 2, 1) // 2 sockets × 4 cores × 2 threads
	if err != nil {
		panic(err)
	}
	fmt.Println(topo)
	fmt.Println("threads of core 1:", topo.CPUsInCore(1))
	fmt.Println("socket 1:", topo.CPUsInSocket(1))

	set, err := topology.ParseCPUSet("0-3,8")
	fmt.Println(set, err)
	_, err = topology.ParseCPUSet("0-20000000")
	fmt.Println(err)
	// Output:
	// 16 CPUs, 8 cores, 2 sockets, 2 NUMA nodes
	// threads of core 1: [1 9]
	// socket 1: [4 5 6 7 12 13 14 15]
	// 0-3,8 <nil>
	// topology: invalid cpuset: cpu number at offset 2 above 8191
}
