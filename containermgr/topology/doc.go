// Package topology describes a machine's CPUs — logical CPUs, the physical
// cores they are threads of, sockets and NUMA nodes — for the CPU and memory
// managers, and parses cpuset strings from outside with bounds.
//
// Discover reads the real machine from sysfs (the root is injectable, so a
// test can lay out a fake sysfs in a temp dir); Synthetic and New build
// topologies for tests and benchmarks:
//
//	topo, err := topology.Discover("/")            // the machine
//	topo, err := topology.Synthetic(2, 64, 2, 1)   // 2 sockets × 64 cores × 2 threads = 256 CPUs
//
// ParseCPUSet accepts the Linux list format ("0-3,8") and refuses, before
// allocating anything, strings longer than MaxCPUSetLen and CPU numbers
// above MaxCPUID: "0-20000000" is an error, not a 20-million-entry set.
//
// A core's id is the lowest logical CPU id among its threads (sysfs core_id
// repeats across sockets), as the kubelet does.
package topology
