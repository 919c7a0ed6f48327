// Package cgroupfs reads the cgroup file systems (v1 and v2), /proc and
// statfs for the parts that measure the node: eviction's stats and the
// stats summary read the same files through these helpers, so a layout
// fix is made once.
//
//	h, err := cgroupfs.Detect("/sys/fs/cgroup")            // v2, or the v1 controller roots
//	mem, err := cgroupfs.ReadMemory(h.MemoryDir("kubepods"), h.V2)
//	cpu, err := cgroupfs.ReadCPUUsage(h.CPUDir("kubepods"), h.V2)
//	pods, err := cgroupfs.ListPodCgroups(h.Memory, "kubepods")
//	fs, err := cgroupfs.Statfs("/var/lib/nodekit")
//
// Working set is usage minus inactive file pages, as cAdvisor (and so the
// kubelet) counts it, never below zero. A file of a cgroup removed while it
// is read fails with an error IsGone recognises.
package cgroupfs
