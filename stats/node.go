package stats

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/internal/cgroupfs"
)

// cgroupView is the cgroup layout of one Summary; nil when there is none.
type cgroupView struct {
	h    cgroupfs.Hierarchy
	pods string // pods cgroup, relative
}

// cgroups resolves the layout (asking Layout until it answers) and the
// hierarchy; nil with no cgroup stats.
func (p *Provider) cgroups() *cgroupView {
	p.mu.Lock()
	if !p.layoutDone {
		l, err := p.cfg.Layout()
		if err != nil {
			p.mu.Unlock()
			p.log.Debug("cgroup layout not known yet", zap.Error(err))
			return nil
		}
		pods, err := cleanCgroup(l.PodsCgroup)
		if err != nil || !filepath.IsAbs(l.CgroupRoot) {
			p.mu.Unlock()
			p.log.Warn("cgroup layout refused", zap.String("root", l.CgroupRoot), zap.String("pods", l.PodsCgroup))
			return nil
		}
		p.cfg.CgroupRoot, p.cfg.PodsCgroup = l.CgroupRoot, pods
		p.layoutDone = true
	}
	root, pods := p.cfg.CgroupRoot, p.cfg.PodsCgroup
	p.mu.Unlock()
	if root == "" {
		return nil
	}
	h, err := cgroupfs.Detect(root)
	if err != nil {
		p.log.Warn("no cgroup stats", zap.Error(err))
		return nil
	}
	return &cgroupView{h: h, pods: pods}
}

// podCgroups maps pod UIDs to their cgroups (relative); nil without a pods
// cgroup.
func (cg *cgroupView) podCgroups(log *zap.Logger) map[string]string {
	if cg == nil || cg.pods == "" {
		return nil
	}
	list, err := cgroupfs.ListPodCgroups(cg.h.Memory, cg.pods)
	if err != nil {
		log.Warn("pod cgroups not listed", zap.Error(err))
		return nil
	}
	out := make(map[string]string, len(list))
	for _, c := range list {
		out[c.UID] = c.Rel
	}
	return out
}

// read reads the CPU and memory of the cgroup rel ("" for the root):
// usageNanoCores from the rate since the previous reading under key.
// isRoot: memory available is capacity (MemTotal) minus working set;
// otherwise it is the limit minus working set when there is a limit.
func (cg *cgroupView) read(p *Provider, gen uint64, now time.Time, key, rel string, memTotal uint64) (*statsapi.CPUStats, *statsapi.MemoryStats, error) {
	t := metav1.NewTime(now)
	var cpu *statsapi.CPUStats
	if dir := cg.h.CPUDir(rel); dir != "" {
		total, err := cgroupfs.ReadCPUUsage(dir, cg.h.V2)
		if err != nil {
			return nil, nil, err
		}
		cpu = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: u64(total)}
		if r, ok := p.rates.rate(gen, key, now.UnixNano(), total); ok {
			cpu.UsageNanoCores = u64(r)
		}
	}
	m, err := cgroupfs.ReadMemory(cg.h.MemoryDir(rel), cg.h.V2, rel == "" && cg.h.V2)
	if err != nil {
		return nil, nil, err
	}
	mem := &statsapi.MemoryStats{Time: t, UsageBytes: u64(m.Usage), WorkingSetBytes: u64(m.WorkingSet), RSSBytes: u64(m.RSS),
		PageFaults: u64(m.PageFaults), MajorPageFaults: u64(m.MajorPageFaults)}
	limit := memTotal
	if rel != "" {
		// A limit above 2^62 is "unlimited" (v1 reports a page-rounded
		// MaxInt64), as cAdvisor reads it.
		limit = 0
		if l, err := cgroupfs.MemoryLimit(cg.h.MemoryDir(rel), cg.h.V2); err == nil && l <= 1<<62 {
			limit = l
		}
	}
	if limit > 0 {
		mem.AvailableBytes = u64(cgroupfs.Sat(limit, m.WorkingSet))
	}
	return cpu, mem, nil
}

// podCPUMemory fills the pod's CPU, memory (and process count) from its
// cgroup; false when the cgroup could not be read (it went).
func (cg *cgroupView) podCPUMemory(p *Provider, gen uint64, now time.Time, ps *statsapi.PodStats, rel string, onlyCPUAndMemory bool) bool {
	cpu, mem, err := cg.read(p, gen, now, "pod-cgroup/"+ps.PodRef.UID, rel, 0)
	if err != nil {
		if !cgroupfs.IsGone(err) {
			p.log.Warn("pod cgroup not read", zap.String("pod", ps.PodRef.Namespace+"/"+ps.PodRef.Name), zap.Error(err))
		}
		return false
	}
	ps.CPU, ps.Memory = cpu, mem
	if !onlyCPUAndMemory {
		if n, err := cgroupfs.ReadUint(filepath.Join(cg.h.PidsDir(rel), "pids.current")); err == nil {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(n)}
		}
	}
	return true
}

// nodeStats is the node part: the root cgroup, the system containers, the
// file systems and the process table.
func (p *Provider) nodeStats(gen uint64, now time.Time, cg *cgroupView, fsv *fsView, onlyCPUAndMemory bool) statsapi.NodeStats {
	n := statsapi.NodeStats{NodeName: p.cfg.NodeName, StartTime: metav1.NewTime(p.boot())}
	if cg != nil {
		memTotal, err := cgroupfs.MemTotal(p.cfg.ProcRoot)
		if err != nil {
			p.log.Warn("no MemTotal", zap.Error(err))
		}
		cpu, mem, err := cg.read(p, gen, now, "node", "", memTotal)
		if err != nil {
			p.log.Warn("root cgroup not read", zap.Error(err))
		} else {
			n.CPU, n.Memory = cpu, mem
		}
		n.SystemContainers = p.systemContainers(gen, now, cg, memTotal)
	}
	if onlyCPUAndMemory {
		return n
	}
	if fsv != nil {
		n.Fs = fsv.node
		if fsv.image != nil || fsv.container != nil {
			n.Runtime = &statsapi.RuntimeStats{ImageFs: fsv.image, ContainerFs: fsv.containerFs()}
		}
	}
	if maxPID, procs, err := cgroupfs.PIDs(p.cfg.ProcRoot); err == nil && maxPID <= math.MaxInt64 && procs <= math.MaxInt64 {
		mp, np := int64(maxPID), int64(procs)
		n.Rlimit = &statsapi.RlimitStats{Time: metav1.NewTime(now), MaxPID: &mp, NumOfRunningProcesses: &np}
	}
	return n
}

// boot is the node's boot time (the node's start time), read once.
func (p *Provider) boot() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bootTime.IsZero() {
		t, err := cgroupfs.BootTime(p.cfg.ProcRoot)
		if err != nil {
			p.log.Debug("no boot time", zap.Error(err))
			return time.Time{}
		}
		p.bootTime = t
	}
	return p.bootTime
}

// systemContainers reads kubelet (the configured cgroup or the agent's
// own), runtime, misc and pods, skipping those not set or not readable.
func (p *Provider) systemContainers(gen uint64, now time.Time, cg *cgroupView, memTotal uint64) []statsapi.ContainerStats {
	type sys struct {
		name      string
		cpu, mem  string // cgroups per controller
		startTime time.Time
	}
	var list []sys
	if k := p.cfg.KubeletCgroup; k != "" {
		list = append(list, sys{statsapi.SystemContainerKubelet, k, k, p.created})
	} else if own, err := cgroupfs.SelfCgroups(p.cfg.ProcRoot, "self"); err == nil {
		if cg.h.V2 {
			list = append(list, sys{statsapi.SystemContainerKubelet, own[""], own[""], p.created})
		} else {
			list = append(list, sys{statsapi.SystemContainerKubelet, own["cpuacct"], own["memory"], p.created})
		}
	}
	if r := p.cfg.RuntimeCgroup; r != "" {
		list = append(list, sys{name: statsapi.SystemContainerRuntime, cpu: r, mem: r})
	}
	if s := p.cfg.SystemCgroup; s != "" {
		list = append(list, sys{name: statsapi.SystemContainerMisc, cpu: s, mem: s})
	}
	if cg.pods != "" {
		list = append(list, sys{name: statsapi.SystemContainerPods, cpu: cg.pods, mem: cg.pods})
	}
	out := make([]statsapi.ContainerStats, 0, len(list))
	for _, s := range list {
		if s.mem == "" && s.cpu == "" {
			continue // the agent runs in the root cgroup: no container of its own
		}
		c := statsapi.ContainerStats{Name: s.name, StartTime: metav1.NewTime(s.startTime)}
		if s.cpu == s.mem {
			cpu, mem, err := cg.read(p, gen, now, "sys/"+s.name, s.mem, 0)
			if err != nil {
				p.log.Debug("system container not read", zap.String("name", s.name), zap.Error(err))
				continue
			}
			c.CPU, c.Memory = cpu, mem
		} else {
			// v1 with the agent in different cgroups per controller; a
			// controller where it is in the root cgroup is not its own.
			if dir := cg.h.CPUDir(s.cpu); dir != "" && s.cpu != "" {
				if total, err := cgroupfs.ReadCPUUsage(dir, false); err == nil {
					c.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: u64(total)}
					if r, ok := p.rates.rate(gen, "sys/"+s.name, now.UnixNano(), total); ok {
						c.CPU.UsageNanoCores = u64(r)
					}
				}
			}
			if m, err := cgroupfs.ReadMemory(cg.h.MemoryDir(s.mem), false, false); err == nil && s.mem != "" {
				c.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), UsageBytes: u64(m.Usage), WorkingSetBytes: u64(m.WorkingSet),
					RSSBytes: u64(m.RSS), PageFaults: u64(m.PageFaults), MajorPageFaults: u64(m.MajorPageFaults)}
			}
			if c.CPU == nil && c.Memory == nil {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// fsView is the file systems of one Summary.
type fsView struct {
	node, image, container *statsapi.FsStats
}

func (f *fsView) containerFs() *statsapi.FsStats {
	if f == nil {
		return nil
	}
	if f.container != nil {
		return f.container
	}
	if f.image != nil {
		return f.image
	}
	return f.node
}

func fsFromStatfs(s cgroupfs.FsStats, now time.Time) *statsapi.FsStats {
	return &statsapi.FsStats{
		Time: metav1.NewTime(now), AvailableBytes: u64(s.Available), CapacityBytes: u64(s.Capacity),
		UsedBytes: u64(cgroupfs.Sat(s.Capacity, s.Free)), InodesFree: u64(s.InodesFree), Inodes: u64(s.Inodes),
		InodesUsed: u64(cgroupfs.Sat(s.Inodes, s.InodesFree)),
	}
}

// fsStats measures the node file system, and the image (and container)
// file systems: the runtime's ImageFsInfo for what images and writable
// layers use, statfs of its mount point (else ImageFsPath, else
// NodeFsPath) for the size.
func (p *Provider) fsStats(ctx context.Context, now time.Time) *fsView {
	v := &fsView{}
	statfs := func(path string) *statsapi.FsStats {
		if path == "" {
			return nil
		}
		s, err := cgroupfs.Statfs(path)
		if err != nil {
			p.log.Debug("file system not measured", zap.Error(err))
			return nil
		}
		return fsFromStatfs(s, now)
	}
	v.node = statfs(p.cfg.NodeFsPath)
	fallback := p.cfg.ImageFsPath
	if fallback == "" {
		fallback = p.cfg.NodeFsPath
	}
	fromCRI := func(u *runtimeapiFsUsage) *statsapi.FsStats {
		f := statfs(u.mountpoint)
		if f == nil {
			f = statfs(fallback)
		}
		if f == nil {
			f = &statsapi.FsStats{Time: metav1.NewTime(now)}
		}
		if u.used != nil {
			f.UsedBytes = u.used
		}
		if u.inodes != nil {
			f.InodesUsed = u.inodes
		}
		return f
	}
	images, containers := p.imageFsInfo(ctx)
	if images != nil {
		v.image = fromCRI(images)
	} else if p.cfg.ImageFsPath != "" {
		v.image = statfs(p.cfg.ImageFsPath)
	} else if v.node != nil {
		c := *v.node
		v.image = &c
	}
	if containers != nil {
		v.container = fromCRI(containers)
	}
	return v
}

// podLogs sums the sizes of the files in a pod's log directory, per
// container directory.
func (p *Provider) podLogs(ps *statsapi.PodStats) (map[string][2]uint64, bool) {
	if p.cfg.PodLogsRoot == "" {
		return nil, false
	}
	ref := ps.PodRef
	for _, s := range []string{ref.Namespace, ref.Name, ref.UID} {
		if s == "" || s == "." || s == ".." || filepath.Base(s) != s {
			return nil, false
		}
	}
	dir := filepath.Join(p.cfg.PodLogsRoot, ref.Namespace+"_"+ref.Name+"_"+ref.UID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			p.log.Debug("pod logs not measured", zap.String("dir", dir), zap.Error(err))
		}
		return nil, false
	}
	out := make(map[string][2]uint64, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var bytes, inodes uint64
		for _, f := range files {
			if info, err := f.Info(); err == nil && info.Mode().IsRegular() {
				bytes += uint64(max(info.Size(), 0))
				inodes++
			}
		}
		out[e.Name()] = [2]uint64{bytes, inodes + 1}
	}
	return out, true
}

// ephemeralStorage fills each container's Logs, the pod's VolumeStats
// (its emptyDir volumes, measured at volsAt) and its EphemeralStorage: the
// writable layers, the logs and the emptyDir volumes, as the kubelet
// counts them.
func (p *Provider) ephemeralStorage(ps *statsapi.PodStats, fsv *fsView, vols []volumeUsage, volsAt, now time.Time) {
	logs, haveLogs := p.podLogs(ps)
	var used, inodes uint64
	var node *statsapi.FsStats
	if fsv != nil {
		node = fsv.node
	}
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.Rootfs != nil {
			used += deref(c.Rootfs.UsedBytes)
			inodes += deref(c.Rootfs.InodesUsed)
		}
		if l, ok := logs[c.Name]; ok {
			c.Logs = &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: u64(l[0]), InodesUsed: u64(l[1])}
			if node != nil {
				c.Logs.AvailableBytes, c.Logs.CapacityBytes, c.Logs.InodesFree, c.Logs.Inodes =
					node.AvailableBytes, node.CapacityBytes, node.InodesFree, node.Inodes
			}
			used += l[0]
			inodes += l[1]
		}
	}
	for _, v := range vols {
		vs := statsapi.VolumeStats{Name: v.name, FsStats: statsapi.FsStats{
			Time: metav1.NewTime(volsAt), UsedBytes: u64(v.u.Bytes), InodesUsed: u64(v.u.Inodes)}}
		if node != nil {
			vs.AvailableBytes, vs.CapacityBytes, vs.InodesFree, vs.Inodes = node.AvailableBytes, node.CapacityBytes, node.InodesFree, node.Inodes
		}
		ps.VolumeStats = append(ps.VolumeStats, vs)
		used += v.u.Bytes
		inodes += v.u.Inodes
	}
	if !haveLogs && len(ps.Containers) == 0 && len(vols) == 0 {
		return
	}
	e := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: u64(used), InodesUsed: u64(inodes)}
	if node != nil {
		e.AvailableBytes, e.CapacityBytes, e.InodesFree, e.Inodes = node.AvailableBytes, node.CapacityBytes, node.InodesFree, node.Inodes
	}
	ps.EphemeralStorage = e
}
