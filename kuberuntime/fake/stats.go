package fake

import (
	"context"
	"maps"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// writableLayerBytes is what every container's writable layer reports.
const writableLayerBytes = 4096

func (r *Runtime) containerStatsLocked(c *container, now int64) *runtimeapi.ContainerStats {
	var nanoCores uint64
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		nanoCores = c.behavior.CPUMillicores * 1_000_000
	}
	mem := c.memoryAt(now)
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.id,
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.meta.Name, Attempt: c.meta.Attempt},
			Labels:      maps.Clone(c.config.Labels),
			Annotations: maps.Clone(c.config.Annotations),
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: c.cpuAt(now)},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: nanoCores},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
			UsageBytes:      &runtimeapi.UInt64Value{Value: mem},
			RssBytes:        &runtimeapi.UInt64Value{Value: mem},
			AvailableBytes:  &runtimeapi.UInt64Value{Value: available(c, mem)},
			PageFaults:      &runtimeapi.UInt64Value{},
			MajorPageFaults: &runtimeapi.UInt64Value{},
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: writableLayerBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: 1},
		},
	}
}

func available(c *container, mem uint64) uint64 {
	if l := c.resources.GetMemoryLimitInBytes(); l > 0 && uint64(l) > mem {
		return uint64(l) - mem
	}
	return 0
}

// ContainerStats returns the stats of one container (of any state: the CPU
// total stops growing when it exits, its working set drops to 0).
func (r *Runtime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	if err := r.begin(ctx, "ContainerStats", containerID, "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return nil, notFound("container", containerID)
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	return r.containerStatsLocked(c, now), nil
}

// ListContainerStats returns the stats of the running containers that match
// the filter (id or unique prefix, sandbox id, label selector).
func (r *Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	if err := r.begin(ctx, "ListContainerStats", filter.GetId(), "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cands, ok := r.containerCandidatesLocked(filter.GetId(), filter.GetPodSandboxId())
	if !ok {
		return []*runtimeapi.ContainerStats{}, nil
	}
	now := r.nowNano()
	out := make([]*runtimeapi.ContainerStats, 0, len(cands))
	for _, c := range cands {
		r.advanceLocked(c, now)
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || !labelsMatch(c.config.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, r.containerStatsLocked(c, now))
	}
	return out, nil
}

func (r *Runtime) sandboxStatsLocked(sb *sandbox, now int64) *runtimeapi.PodSandboxStats {
	var cpu, nanoCores, mem uint64
	cs := make([]*runtimeapi.ContainerStats, 0, len(sb.containers))
	for _, c := range sb.containers {
		r.advanceLocked(c, now)
		st := r.containerStatsLocked(c, now)
		cpu += st.Cpu.UsageCoreNanoSeconds.Value
		nanoCores += st.Cpu.UsageNanoCores.Value
		mem += st.Memory.WorkingSetBytes.Value
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			cs = append(cs, st)
		}
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          sb.id,
			Metadata:    sandboxMeta(sb.meta),
			Labels:      maps.Clone(sb.config.Labels),
			Annotations: maps.Clone(sb.config.Annotations),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{
				Timestamp:            now,
				UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
				UsageNanoCores:       &runtimeapi.UInt64Value{Value: nanoCores},
			},
			Memory: &runtimeapi.MemoryUsage{
				Timestamp:       now,
				WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
				UsageBytes:      &runtimeapi.UInt64Value{Value: mem},
				RssBytes:        &runtimeapi.UInt64Value{Value: mem},
			},
			Network:    &runtimeapi.NetworkUsage{Timestamp: now},
			Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: uint64(len(cs)) + 1}},
			Containers: cs,
		},
	}
}

// PodSandboxStats returns the sandbox's stats: the sums over its containers,
// and the stats of its running containers.
func (r *Runtime) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	if err := r.begin(ctx, "PodSandboxStats", podSandboxID, "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.lookupSandboxLocked(podSandboxID)
	if sb == nil {
		return nil, notFound("sandbox", podSandboxID)
	}
	return r.sandboxStatsLocked(sb, r.nowNano()), nil
}

// ListPodSandboxStats returns the stats of the ready sandboxes that match
// the filter (id or unique prefix, label selector).
func (r *Runtime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	if err := r.begin(ctx, "ListPodSandboxStats", filter.GetId(), "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cands := r.sandboxOrder
	if id := filter.GetId(); id != "" {
		sb := r.lookupSandboxLocked(id)
		if sb == nil {
			return []*runtimeapi.PodSandboxStats{}, nil
		}
		cands = []*sandbox{sb}
	}
	now := r.nowNano()
	out := make([]*runtimeapi.PodSandboxStats, 0, len(cands))
	for _, sb := range cands {
		if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY || !labelsMatch(sb.config.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, r.sandboxStatsLocked(sb, now))
	}
	return out, nil
}
