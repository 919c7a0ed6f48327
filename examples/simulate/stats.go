package main

import (
	"context"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"k8s.io/apimachinery/pkg/types"
)

// fakeStats is a node's eviction stats, read from its fake runtime: the
// node's memory is its capacity, in use what the simulated processes use
// (their memory= behaviour), so a pod whose memory grows puts the node
// under memory pressure and is evicted as on a real node.
type fakeStats struct {
	rt      *fake.Runtime
	memory  uint64 // capacity in bytes
	storage uint64 // ephemeral-storage capacity in bytes
}

// Summary implements eviction.StatsProvider.
func (s *fakeStats) Summary(ctx context.Context) (*eviction.Summary, error) {
	sbs, err := s.rt.ListPodSandboxStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	var used, procs uint64
	pods := make([]eviction.PodStats, 0, len(sbs))
	for _, sb := range sbs {
		ps := eviction.PodStats{UID: types.UID(sb.GetAttributes().GetMetadata().GetUid())}
		lin := sb.GetLinux()
		ps.MemoryWorkingSetBytes = lin.GetMemory().GetWorkingSetBytes().GetValue()
		ps.Processes = lin.GetProcess().GetProcessCount().GetValue()
		for _, c := range lin.GetContainers() {
			ps.Containers = append(ps.Containers, eviction.ContainerStats{
				Name:                  c.GetAttributes().GetMetadata().GetName(),
				MemoryWorkingSetBytes: c.GetMemory().GetWorkingSetBytes().GetValue(),
			})
		}
		used += ps.MemoryWorkingSetBytes
		procs += ps.Processes
		pods = append(pods, ps)
	}
	avail := uint64(0)
	if used < s.memory {
		avail = s.memory - used
	}
	return &eviction.Summary{
		Memory: &eviction.MemoryStats{AvailableBytes: avail, WorkingSetBytes: used},
		NodeFs: &eviction.FsStats{AvailableBytes: s.storage, CapacityBytes: s.storage,
			InodesFree: 1 << 24, Inodes: 1 << 24},
		PID:  &eviction.PIDStats{MaxPID: 1 << 22, NumProcesses: procs},
		Pods: pods,
	}, nil
}
