package stats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

// ContainerStatsLister is the CRI call the summary needs from the runtime
// (kuberuntime/remote's Client and kuberuntime/fake's Runtime have it).
// A runtime that also has ListPodSandboxStats (PodSandboxStatsLister) or
// ImageFsInfo (ImageFsInfoer) is asked those too.
type ContainerStatsLister interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// PodSandboxStatsLister is the optional CRI ListPodSandboxStats: pod-level
// CPU, memory, network and process counts when no pod cgroup is read. A
// runtime answering Unimplemented is not asked again.
type PodSandboxStatsLister interface {
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
}

// ImageFsInfoer is the optional CRI ImageFsInfo: what the image (and, on
// containerd 2.x, the container) file systems hold.
type ImageFsInfoer interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// PodLister lists the pods the runtime runs, as the agent sees them:
// names, namespaces, UIDs, the newest sandbox's creation time (the pod's
// start time in the summary, as the kubelet reports it) and the
// containers with their creation times. kuberuntime.Manager's GetPods is
// one; Summary asks for running pods only (all=false).
type PodLister interface {
	GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error)
}

// CgroupLayout is where the cgroups are (Config's fields of the same names).
type CgroupLayout struct {
	CgroupRoot string
	PodsCgroup string
}

// Config configures a Provider.
type Config struct {
	// NodeName is the summary's node name (required).
	NodeName string
	// Runtime gives the containers' stats (required).
	Runtime ContainerStatsLister
	// Pods lists the running pods (required).
	Pods PodLister

	// CgroupRoot is where the cgroup file systems are mounted (such as
	// "/sys/fs/cgroup"); empty means no cgroup stats: no node CPU and
	// memory, no system containers, pod CPU and memory from the runtime.
	// PodsCgroup is the pods cgroup relative to a hierarchy root (such as
	// "kubepods"); its pod<uid> children (directly or under the QoS
	// cgroups) give the pods' CPU, memory and process counts, and it is
	// the "pods" system container.
	CgroupRoot, PodsCgroup string
	// Layout, if set, is asked at each Summary until it answers, for the
	// CgroupRoot and PodsCgroup (for a layout known only once the container
	// manager has started). Until it answers, the summary has no cgroup
	// stats.
	Layout func() (CgroupLayout, error)
	// KubeletCgroup, RuntimeCgroup and SystemCgroup are the cgroups
	// (relative to a hierarchy root) of the system containers "kubelet",
	// "runtime" and "misc". An empty KubeletCgroup means the agent
	// process's own cgroups (per controller, from /proc/self/cgroup); the
	// other two are left out when empty, as the kubelet does.
	KubeletCgroup, RuntimeCgroup, SystemCgroup string

	// NodeFsPath is a path on the node file system (the agent's root
	// directory); empty means no node fs stats. ImageFsPath is a path on
	// the image file system, used when the runtime reports no mount point
	// for it; empty means NodeFsPath.
	NodeFsPath, ImageFsPath string
	// PodLogsRoot, when set, is the pod log directory
	// (<root>/<namespace>_<name>_<uid>/<container>/): each container's
	// Logs, and the pod's ephemeral storage, count the sizes of its files.
	PodLogsRoot string
	// PodsDir, when set, is the agent's pods directory: the emptyDir
	// volumes <PodsDir>/<uid>/volumes/kubernetes.io~empty-dir/<volume> on
	// the node's disk are measured (allocated blocks and inodes, as du)
	// into the pod's VolumeStats and ephemeral storage.
	PodsDir string
	// VolumeStatsPeriod is how long a pod's measured emptyDir volumes are
	// reused before they are walked again (default 1 minute, the kubelet's
	// volume stats period); negative is an error.
	VolumeStatsPeriod time.Duration
	// ProcRoot is where proc is mounted (default "/proc").
	ProcRoot string

	Clock  clock.PassiveClock
	Logger *zap.Logger
}

// Provider builds the kubelet's stats summary (k8s.io/kubelet's
// stats/v1alpha1 Summary). It is safe for concurrent use.
type Provider struct {
	cfg     Config
	log     *zap.Logger
	clock   clock.PassiveClock
	rates   rateCache
	vols    volumeCache
	created time.Time

	mu           sync.Mutex
	layoutDone   bool
	noSandboxAPI bool // ListPodSandboxStats answered Unimplemented
	bootTime     time.Time
}

// New validates cfg and fills defaults; it does no I/O.
func New(cfg Config) (*Provider, error) {
	var errs []error
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is empty", ErrInvalidConfig))
	}
	if cfg.Runtime == nil {
		errs = append(errs, fmt.Errorf("%w: Runtime is nil", ErrInvalidConfig))
	}
	if cfg.Pods == nil {
		errs = append(errs, fmt.Errorf("%w: Pods is nil", ErrInvalidConfig))
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	for _, d := range []struct{ name, path string }{
		{"CgroupRoot", cfg.CgroupRoot}, {"NodeFsPath", cfg.NodeFsPath}, {"ImageFsPath", cfg.ImageFsPath},
		{"PodLogsRoot", cfg.PodLogsRoot}, {"PodsDir", cfg.PodsDir}, {"ProcRoot", cfg.ProcRoot},
	} {
		if d.path != "" && !filepath.IsAbs(d.path) {
			errs = append(errs, fmt.Errorf("%w: %s %q is not absolute", ErrInvalidConfig, d.name, d.path))
		}
	}
	for _, c := range []struct{ name, rel string }{
		{"PodsCgroup", cfg.PodsCgroup}, {"KubeletCgroup", cfg.KubeletCgroup},
		{"RuntimeCgroup", cfg.RuntimeCgroup}, {"SystemCgroup", cfg.SystemCgroup},
	} {
		if _, err := cleanCgroup(c.rel); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, c.name, err))
		}
	}
	if cfg.VolumeStatsPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: VolumeStatsPeriod %v is negative", ErrInvalidConfig, cfg.VolumeStatsPeriod))
	} else if cfg.VolumeStatsPeriod == 0 {
		cfg.VolumeStatsPeriod = time.Minute
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg.PodsCgroup, _ = cleanCgroup(cfg.PodsCgroup)
	cfg.KubeletCgroup, _ = cleanCgroup(cfg.KubeletCgroup)
	cfg.RuntimeCgroup, _ = cleanCgroup(cfg.RuntimeCgroup)
	cfg.SystemCgroup, _ = cleanCgroup(cfg.SystemCgroup)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Provider{
		cfg: cfg, log: cfg.Logger.Named("stats"), clock: cfg.Clock, created: cfg.Clock.Now(),
		layoutDone: cfg.Layout == nil,
	}, nil
}

// cleanCgroup makes rel a slash path below a hierarchy root, without
// leading or trailing slashes; ".." is refused.
func cleanCgroup(rel string) (string, error) {
	if rel == "" {
		return "", nil
	}
	if strings.Contains(rel, "..") || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("cgroup %q is not below the root", rel)
	}
	c := strings.Trim(filepath.ToSlash(filepath.Clean("/"+rel)), "/")
	if c == "" {
		return "", fmt.Errorf("cgroup %q is the root", rel)
	}
	return c, nil
}

// Summary returns the node's stats summary, as the kubelet's
// /stats/summary does; onlyCPUAndMemory is its only_cpu_and_memory=true
// (node, system containers, pods and containers with CPU, memory and
// start times only). A failing pod list or CRI container stats call is an
// error; a failing cgroup, file system or optional CRI call leaves its
// part out and is logged.
//
// usageNanoCores is the runtime's when it reports one; otherwise it is
// the rate since the previous Summary of the same container, pod or
// cgroup (absent on the first).
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gen := p.rates.begin()
	pods, err := p.cfg.Pods.GetPods(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("%w: listing pods: %w", ErrStats, err)
	}
	cg := p.cgroups()
	podCgroups := cg.podCgroups(p.log)
	var sandboxes map[string]*runtimeapi.PodSandboxStats // by pod UID
	if podCgroups == nil || !onlyCPUAndMemory {
		sandboxes = p.sandboxStats(ctx)
	}
	// The sandbox stats carry their containers' stats: ask
	// ListContainerStats only when they miss a running container.
	byID := containerStatsOf(sandboxes)
	if !allListed(pods, byID) {
		cstats, err := p.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
		if err != nil {
			return nil, fmt.Errorf("%w: CRI ListContainerStats: %w", ErrStats, err)
		}
		byID = make(map[string]*runtimeapi.ContainerStats, len(cstats))
		for _, st := range cstats {
			if id := st.GetAttributes().GetId(); id != "" {
				byID[id] = st
			}
		}
	}
	now := p.clock.Now()

	var fs *fsView
	if !onlyCPUAndMemory {
		fs = p.fsStats(ctx, now)
	}
	podStats := p.podStats(ctx, gen, now, pods, byID, cg, podCgroups, sandboxes, fs, onlyCPUAndMemory)
	node := p.nodeStats(gen, now, cg, fs, onlyCPUAndMemory)
	p.rates.end(gen)
	if err := ctx.Err(); err != nil {
		return nil, err // parts were cut short
	}
	if !onlyCPUAndMemory {
		p.endVolumes(gen)
	}
	return &statsapi.Summary{Node: node, Pods: podStats}, nil
}

// podStats builds one PodStats per running pod, sorted by namespace and
// name.
func (p *Provider) podStats(ctx context.Context, gen uint64, now time.Time, pods []*kubetypes.Pod,
	byID map[string]*runtimeapi.ContainerStats, cg *cgroupView, podCgroups map[string]string,
	sandboxes map[string]*runtimeapi.PodSandboxStats, fs *fsView, onlyCPUAndMemory bool) []statsapi.PodStats {
	out := make([]statsapi.PodStats, 0, len(pods))
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.ID)},
			StartTime:  metav1.NewTime(time.Unix(0, pod.CreatedAt)),
			Containers: make([]statsapi.ContainerStats, 0, len(pod.Containers)),
		}
		for _, c := range pod.Containers {
			st := byID[c.ID]
			if st == nil {
				continue
			}
			ps.Containers = append(ps.Containers, p.containerStats(gen, now, st, c, fs, onlyCPUAndMemory))
		}
		slices.SortFunc(ps.Containers, func(a, b statsapi.ContainerStats) int { return strings.Compare(a.Name, b.Name) })

		sb := sandboxes[string(pod.ID)]
		switch rel, ok := podCgroups[string(pod.ID)]; {
		case ok && cg.podCPUMemory(p, gen, now, &ps, rel, onlyCPUAndMemory):
		case sb != nil && sb.GetLinux() != nil:
			p.sandboxCPUMemory(gen, &ps, sb)
		default:
			sumContainers(&ps, now)
		}
		sumSwap(&ps)
		if !onlyCPUAndMemory {
			if sb != nil {
				addSandboxExtras(&ps, sb)
			}
			vols, at := p.podVolumes(ctx, gen, now, string(pod.ID))
			p.ephemeralStorage(&ps, fs, vols, at, now)
		}
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b statsapi.PodStats) int {
		return cmp.Or(strings.Compare(a.PodRef.Namespace, b.PodRef.Namespace), strings.Compare(a.PodRef.Name, b.PodRef.Name),
			strings.Compare(a.PodRef.UID, b.PodRef.UID))
	})
	return out
}

// containerStatsOf indexes the container stats in the sandbox stats by
// container ID.
func containerStatsOf(sandboxes map[string]*runtimeapi.PodSandboxStats) map[string]*runtimeapi.ContainerStats {
	n := 0
	for _, sb := range sandboxes {
		n += len(sb.GetLinux().GetContainers())
	}
	out := make(map[string]*runtimeapi.ContainerStats, n)
	for _, sb := range sandboxes {
		for _, st := range sb.GetLinux().GetContainers() {
			if id := st.GetAttributes().GetId(); id != "" {
				out[id] = st
			}
		}
	}
	return out
}

// allListed: every running container of pods has stats in byID.
func allListed(pods []*kubetypes.Pod, byID map[string]*runtimeapi.ContainerStats) bool {
	for _, pod := range pods {
		for _, c := range podContainers(pod) {
			if byID[c.ID] == nil {
				return false
			}
		}
	}
	return true
}

// sandboxStats asks ListPodSandboxStats, once it is known to work or
// before it is known not to.
func (p *Provider) sandboxStats(ctx context.Context) map[string]*runtimeapi.PodSandboxStats {
	l, ok := p.cfg.Runtime.(PodSandboxStatsLister)
	if !ok {
		return nil
	}
	p.mu.Lock()
	skip := p.noSandboxAPI
	p.mu.Unlock()
	if skip {
		return nil
	}
	list, err := l.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			p.mu.Lock()
			p.noSandboxAPI = true
			p.mu.Unlock()
			p.log.Info("the runtime has no ListPodSandboxStats: pod stats from cgroups or container sums")
			return nil
		}
		p.log.Warn("CRI ListPodSandboxStats failed", zap.Error(err))
		return nil
	}
	out := make(map[string]*runtimeapi.PodSandboxStats, len(list))
	for _, sb := range list {
		if uid := sb.GetAttributes().GetMetadata().GetUid(); uid != "" {
			out[uid] = sb
		}
	}
	return out
}

func u64(v uint64) *uint64 { return &v }

// containerStats is one container's stats from its CRI stats.
func (p *Provider) containerStats(gen uint64, now time.Time, st *runtimeapi.ContainerStats, c *kubetypes.Container,
	fs *fsView, onlyCPUAndMemory bool) statsapi.ContainerStats {
	name := st.GetAttributes().GetMetadata().GetName()
	if name == "" {
		name = c.Name
	}
	cs := statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
	if cpu := st.GetCpu(); cpu != nil {
		cs.CPU = &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpu.GetTimestamp()))}
		if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
			cs.CPU.UsageCoreNanoSeconds = &v.Value
		}
		if v := cpu.GetUsageNanoCores(); v != nil {
			cs.CPU.UsageNanoCores = &v.Value
		} else if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
			if r, ok := p.rates.rate(gen, st.GetAttributes().GetId(), cpu.GetTimestamp(), v.GetValue()); ok {
				cs.CPU.UsageNanoCores = u64(r)
			}
		}
	} else {
		cs.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: u64(0), UsageNanoCores: u64(0)}
	}
	if m := st.GetMemory(); m != nil {
		cs.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.GetTimestamp()))}
		for _, f := range []struct {
			dst **uint64
			v   *runtimeapi.UInt64Value
		}{
			{&cs.Memory.WorkingSetBytes, m.GetWorkingSetBytes()}, {&cs.Memory.UsageBytes, m.GetUsageBytes()},
			{&cs.Memory.RSSBytes, m.GetRssBytes()}, {&cs.Memory.AvailableBytes, m.GetAvailableBytes()},
			{&cs.Memory.PageFaults, m.GetPageFaults()}, {&cs.Memory.MajorPageFaults, m.GetMajorPageFaults()},
		} {
			if f.v != nil {
				*f.dst = &f.v.Value
			}
		}
	} else {
		cs.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: u64(0), UsageBytes: u64(0), RSSBytes: u64(0)}
	}
	if sw := st.GetSwap(); sw != nil {
		cs.Swap = &statsapi.SwapStats{Time: metav1.NewTime(time.Unix(0, sw.GetTimestamp()))}
		if v := sw.GetSwapUsageBytes(); v != nil {
			cs.Swap.SwapUsageBytes = &v.Value
		}
		if v := sw.GetSwapAvailableBytes(); v != nil {
			cs.Swap.SwapAvailableBytes = &v.Value
		}
	}
	if onlyCPUAndMemory {
		return cs
	}
	if wl := st.GetWritableLayer(); wl != nil {
		cs.Rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.GetTimestamp()))}
		if v := wl.GetUsedBytes(); v != nil {
			cs.Rootfs.UsedBytes = &v.Value
		}
		if v := wl.GetInodesUsed(); v != nil {
			cs.Rootfs.InodesUsed = &v.Value
		}
		if f := fs.containerFs(); f != nil {
			cs.Rootfs.AvailableBytes, cs.Rootfs.CapacityBytes = f.AvailableBytes, f.CapacityBytes
			cs.Rootfs.InodesFree, cs.Rootfs.Inodes = f.InodesFree, f.Inodes
		}
	}
	return cs
}

// sandboxCPUMemory takes the pod's CPU and memory from its sandbox stats.
func (p *Provider) sandboxCPUMemory(gen uint64, ps *statsapi.PodStats, sb *runtimeapi.PodSandboxStats) {
	l := sb.GetLinux()
	if cpu := l.GetCpu(); cpu != nil {
		ps.CPU = &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpu.GetTimestamp()))}
		if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
			ps.CPU.UsageCoreNanoSeconds = &v.Value
		}
		if v := cpu.GetUsageNanoCores(); v != nil {
			ps.CPU.UsageNanoCores = &v.Value
		} else if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
			if r, ok := p.rates.rate(gen, "pod-sandbox/"+ps.PodRef.UID, cpu.GetTimestamp(), v.GetValue()); ok {
				ps.CPU.UsageNanoCores = u64(r)
			}
		}
	}
	if m := l.GetMemory(); m != nil {
		ps.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.GetTimestamp()))}
		if v := m.GetWorkingSetBytes(); v != nil {
			ps.Memory.WorkingSetBytes = &v.Value
		}
		if v := m.GetUsageBytes(); v != nil {
			ps.Memory.UsageBytes = &v.Value
		}
		if v := m.GetRssBytes(); v != nil {
			ps.Memory.RSSBytes = &v.Value
		}
		if v := m.GetAvailableBytes(); v != nil {
			ps.Memory.AvailableBytes = &v.Value
		}
		if v := m.GetPageFaults(); v != nil {
			ps.Memory.PageFaults = &v.Value
		}
		if v := m.GetMajorPageFaults(); v != nil {
			ps.Memory.MajorPageFaults = &v.Value
		}
	}
}

// addSandboxExtras adds the network and process counts of the sandbox
// stats.
func addSandboxExtras(ps *statsapi.PodStats, sb *runtimeapi.PodSandboxStats) {
	l := sb.GetLinux()
	if n := l.GetNetwork(); n != nil && n.GetDefaultInterface() != nil {
		ps.Network = &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.GetTimestamp()))}
		ps.Network.InterfaceStats = criInterface(n.GetDefaultInterface())
		for _, i := range n.GetInterfaces() {
			ps.Network.Interfaces = append(ps.Network.Interfaces, criInterface(i))
		}
	}
	if pr := l.GetProcess(); pr != nil && pr.GetProcessCount() != nil && ps.ProcessStats == nil {
		ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(pr.GetProcessCount().GetValue())}
	}
}

func criInterface(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
	s := statsapi.InterfaceStats{Name: i.GetName()}
	if v := i.GetRxBytes(); v != nil {
		s.RxBytes = &v.Value
	}
	if v := i.GetRxErrors(); v != nil {
		s.RxErrors = &v.Value
	}
	if v := i.GetTxBytes(); v != nil {
		s.TxBytes = &v.Value
	}
	if v := i.GetTxErrors(); v != nil {
		s.TxErrors = &v.Value
	}
	return s
}

// sumContainers makes the pod's CPU and memory the sums of its
// containers', as the kubelet does without a pod cgroup reading.
func sumContainers(ps *statsapi.PodStats, now time.Time) {
	var cpu, nano, ws, usage, rss, avail, pf, mpf uint64
	cpuTime, memTime := metav1.NewTime(now), metav1.NewTime(now)
	var haveCPU, haveMem bool
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.CPU != nil {
			haveCPU = true
			cpuTime = c.CPU.Time
			cpu += deref(c.CPU.UsageCoreNanoSeconds)
			nano += deref(c.CPU.UsageNanoCores)
		}
		if c.Memory != nil {
			haveMem = true
			memTime = c.Memory.Time
			ws += deref(c.Memory.WorkingSetBytes)
			usage += deref(c.Memory.UsageBytes)
			rss += deref(c.Memory.RSSBytes)
			avail += deref(c.Memory.AvailableBytes)
			pf += deref(c.Memory.PageFaults)
			mpf += deref(c.Memory.MajorPageFaults)
		}
	}
	if haveCPU {
		ps.CPU = &statsapi.CPUStats{Time: cpuTime, UsageCoreNanoSeconds: u64(cpu), UsageNanoCores: u64(nano)}
	}
	if haveMem {
		ps.Memory = &statsapi.MemoryStats{Time: memTime, WorkingSetBytes: u64(ws), UsageBytes: u64(usage), RSSBytes: u64(rss),
			AvailableBytes: u64(avail), PageFaults: u64(pf), MajorPageFaults: u64(mpf)}
	}
}

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

// sumSwap makes the pod's swap the sums of its containers' when any
// reports swap (the CRI has no pod-level swap).
func sumSwap(ps *statsapi.PodStats) {
	var usage, avail uint64
	var t metav1.Time
	have := false
	for i := range ps.Containers {
		if sw := ps.Containers[i].Swap; sw != nil {
			have, t = true, sw.Time
			usage += deref(sw.SwapUsageBytes)
			avail += deref(sw.SwapAvailableBytes)
		}
	}
	if have {
		ps.Swap = &statsapi.SwapStats{Time: t, SwapUsageBytes: u64(usage), SwapAvailableBytes: u64(avail)}
	}
}

func podContainers(p *kubetypes.Pod) []*kubetypes.Container {
	if p == nil {
		return nil
	}
	return p.Containers
}
