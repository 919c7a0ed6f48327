// Package stats builds the kubelet's stats summary (k8s.io/kubelet's
// stats/v1alpha1 Summary, what /stats/summary serves and metrics-server
// and `kubectl top` read) and the resource metrics of /metrics/resource,
// from what a nodekit agent has: the CRI's container and pod sandbox
// stats, the cgroup file systems (v1 and v2) for the node, the system
// containers and the pods, statfs for the node and image file systems,
// and the pod log directories.
//
//	p, err := stats.New(stats.Config{
//		NodeName:   "node-1",
//		Runtime:    criClient,  // ListContainerStats (+ ListPodSandboxStats, ImageFsInfo when it has them)
//		Pods:       runtimeMgr, // kuberuntime.Manager: GetPods
//		CgroupRoot: "/sys/fs/cgroup", PodsCgroup: "kubepods",
//		NodeFsPath: "/var/lib/nodekit",
//	})
//	summary, err := p.Summary(ctx, false)          // /stats/summary
//	cpuMem, err := p.Summary(ctx, true)            // ?only_cpu_and_memory=true
//	reg.MustRegister(stats.NewResourceCollector(p, stats.CollectorConfig{Context: ctx})) // /metrics/resource
//
// An agent built with nodekit's Builder gets a provider wired to its
// runtime, its container manager's cgroups and its root directory with
// Builder.WithStats.
//
// # Where each part comes from
//
//   - Pods: the running pods as Config.Pods lists them (name, namespace,
//     UID; the newest sandbox's creation time is the pod's start time, as
//     the kubelet reports it), sorted by namespace and name.
//   - Containers: their CRI stats (CPU, memory, swap, writable layer) from
//     ListPodSandboxStats when it was asked and has every running
//     container, else from ListContainerStats; the container's creation
//     time as its start time. Values point into the CRI messages.
//   - Pod CPU and memory: the pod's cgroup when a pods cgroup is set and
//     the pod has one (as the kubelet reads it through cAdvisor), else the
//     CRI's ListPodSandboxStats when the runtime has it (one that answers
//     Unimplemented is not asked again), else the sums over its
//     containers. Process counts from pids.current or the sandbox stats,
//     the network from the sandbox stats.
//   - Ephemeral storage: the containers' writable layers, their log files
//     under Config.PodLogsRoot (file sizes) and the pod's emptyDir volumes
//     on the node's disk under Config.PodsDir (allocated blocks and
//     inodes, walked as eviction walks them, at most once per
//     VolumeStatsPeriod), each volume also in VolumeStats.
//   - Node: CPU and memory of the root cgroup (working set = usage minus
//     inactive file; available = MemTotal minus working set), the system
//     containers "kubelet" (the agent's own cgroups unless configured),
//     "runtime" and "misc" when configured, and "pods"; statfs of
//     NodeFsPath; the image file system from CRI ImageFsInfo (used bytes)
//     and statfs of its mount point; the process table (rlimit); the boot
//     time as the node's start time.
//
// # usageNanoCores
//
// When the runtime reports a rate it is used as is (containerd and the
// fake do). Otherwise, as the kubelet's CRI stats provider does, the rate
// is the CPU time used between the previous sample of the same container
// (or pod, or cgroup) and this one, so the first Summary has none. The
// previous samples are kept per container, and a container missing from
// a Summary is dropped from them at its end: the cache is bounded by what
// the runtime runs. Several callers share the samples, so the rate is
// over the interval since whichever call came last.
//
// With onlyCPUAndMemory the summary holds what the kubelet's
// only_cpu_and_memory=true holds: the node's and each pod's and
// container's CPU, memory and start times, and the system containers; no
// file systems, network, processes or rlimit.
package stats
