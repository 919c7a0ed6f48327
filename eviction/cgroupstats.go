package eviction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/lifecycle"
)

// CgroupStatsConfig configures a CgroupStats.
type CgroupStatsConfig struct {
	// CgroupRoot is where the cgroup file systems are mounted (default
	// "/sys/fs/cgroup"). A cgroup.controllers file there means the unified
	// (v2) hierarchy; otherwise the v1 controllers are the directories
	// memory/ and pids/ under it.
	CgroupRoot string
	// PodsCgroup is the pods cgroup relative to a hierarchy root, such as
	// "kubepods" (cgroupfs: <pods>/pod<uid>, <pods>/burstable/pod<uid>,
	// <pods>/besteffort/pod<uid>) or "kubepods.slice" (systemd:
	// <pods>/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
	// Empty: no pod and no allocatable memory stats.
	PodsCgroup string
	// Layout, if set, is asked at each Summary until it answers, for the
	// cgroup root, the pods cgroup and the allocatable memory (instead of
	// CgroupRoot, PodsCgroup and AllocatableMemoryBytes): for a layout
	// known only once another part has started, such as a container
	// manager. Until it answers, Summary returns its error.
	Layout func() (CgroupLayout, error)
	// AllocatableMemoryBytes is the capacity allocatableMemory.available
	// is measured against; 0 means the pods cgroup's memory limit (capped
	// at the node's MemTotal).
	AllocatableMemoryBytes uint64
	// NodeFsPath is a path on the node file system (the agent's root
	// directory); empty means no nodefs stats. ImageFsPath is a path on a
	// dedicated image file system; empty means images share NodeFs.
	NodeFsPath, ImageFsPath string
	// ProcRoot is where proc is mounted (default "/proc").
	ProcRoot string
	// ContainerStats, when set, is asked every Summary for the stats of
	// all containers (CRI ListContainerStats): each container's writable
	// layer (PodStats.RootfsBytes/RootfsInodes, ContainerStats.RootfsBytes)
	// and working set. Containers are matched to pods by the
	// io.kubernetes.pod.uid and io.kubernetes.container.name labels; a pod
	// with containers but no pod cgroup is reported from these stats
	// alone. Nil: no writable layers. A failing call is logged and the
	// rest of the Summary is still returned.
	ContainerStats ContainerStatsLister
	// PodLogsRoot, when set, is the runtime's pod log directory (such as
	// "/var/log/pods"), laid out <PodLogsRoot>/<namespace>_<name>_<uid>/
	// <container>/<restart>.log: each pod's directory is measured
	// (PodStats.LogsBytes/LogsInodes) and each container's
	// (ContainerStats.LogsBytes).
	PodLogsRoot string
	// PodsDir, when set, is the agent's pods directory; the emptyDir
	// volumes <PodsDir>/<uid>/volumes/kubernetes.io~empty-dir/<volume> are
	// measured (PodStats.VolumeBytes/VolumeInodes), except those on
	// another file system than their parent (medium Memory, a tmpfs).
	PodsDir string
	// DiskUsagePeriod is how long the measured use of a pod's log
	// directory or emptyDir volumes is reused before that directory is
	// walked again; 0 walks them at every Summary. The kubelet refreshes
	// these about once a minute; a period bounds what a pod with a huge
	// tree costs each cycle. Writable layers (CRI) are asked for at every
	// Summary. Negative is an error.
	DiskUsagePeriod time.Duration
	// BackgroundDiskUsage moves the walks of log directories and emptyDir
	// volumes out of Summary into Run, a walker with its own period
	// (DiskUsagePeriod, DefaultDiskUsagePeriod when 0), as the kubelet's
	// cAdvisor and volume stats do: Summary then never walks, so a pod with
	// millions of files cannot delay a memory eviction. It reports each
	// directory's last walk, however old; a directory not walked yet (a
	// new pod) counts as nothing and is walked at once. Run must run.
	BackgroundDiskUsage bool
	Clock               clock.Clock
	Logger              *zap.Logger
}

// CgroupLayout is where CgroupStats reads the cgroups (CgroupStatsConfig's
// fields of the same names).
type CgroupLayout struct {
	CgroupRoot             string
	PodsCgroup             string
	AllocatableMemoryBytes uint64
}

// CgroupStats is a StatsProvider that reads the cgroup hierarchy, /proc and
// statfs (and CRI stats and directory walks for disk use, when
// configured). It keeps no state between calls other than the walks reused
// for DiskUsagePeriod, and is safe for concurrent use.
//
// Working set is usage minus inactive file pages, as cAdvisor counts it
// (never below zero). Node memory: capacity is MemTotal from /proc/meminfo
// and usage is the root cgroup's — on v1 memory.usage_in_bytes with
// total_inactive_file from memory.stat; on v2, whose root has no
// memory.current, anon + file from the root memory.stat (what runc's cgroup
// library, and so cAdvisor and the kubelet, report for the v2 root) with
// inactive_file. Available is capacity minus working set, never negative.
// AllocatableMemory is measured the same way on the pods cgroup. Each pod
// cgroup gives MemoryWorkingSetBytes and Processes (pids.current, or the
// number of pids in cgroup.procs of the pod cgroup and all its
// descendants when the pids controller is missing). Disk use and
// PodStats.Containers come from CRI stats and directory walks when
// ContainerStats, PodLogsRoot or PodsDir are set (see those fields); a
// walk counts allocated blocks and inodes, does not follow symbolic links,
// does not cross into other file systems, does not descend more than 64
// levels, and stops when ctx ends. PID: MaxPID is the smaller of kernel.pid_max and
// kernel.threads-max, NumProcesses the number of scheduling entities
// (threads) in /proc/loadavg, the count pid_max limits.
type CgroupStats struct {
	cfg    CgroupStatsConfig
	log    *zap.Logger
	statfs func(path string) (*FsStats, error)
	du     func(ctx context.Context, path string, child func(name string, isDir bool, u diskUsage)) (diskUsage, bool, error)

	duMu    sync.Mutex
	duCache map[string]duResult // by directory, with DiskUsagePeriod
	// wanted: with BackgroundDiskUsage, the directories Summary asked for
	// and when it last did; the walker walks them. Under duMu.
	wanted map[string]time.Time
	kick   chan struct{} // a directory was asked for that has no walk yet
	once   lifecycle.Once

	layoutMu sync.Mutex
	laidOut  bool // cfg holds the Layout's answer (or there is no Layout)
}

// layOut takes the cgroup layout from cfg.Layout once it answers.
func (s *CgroupStats) layOut() error {
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	if s.laidOut {
		return nil
	}
	l, err := s.cfg.Layout()
	if err != nil {
		return fmt.Errorf("%w: cgroup layout: %w", ErrStats, err)
	}
	if !filepath.IsAbs(l.CgroupRoot) {
		return fmt.Errorf("%w: cgroup layout: CgroupRoot %q is not absolute", ErrInvalidConfig, l.CgroupRoot)
	}
	pods := strings.Trim(filepath.ToSlash(filepath.Clean("/"+l.PodsCgroup)), "/")
	if l.PodsCgroup != "" && (pods == "" || strings.Contains(l.PodsCgroup, "..")) {
		return fmt.Errorf("%w: cgroup layout: PodsCgroup %q is not a cgroup below the root", ErrInvalidConfig, l.PodsCgroup)
	}
	s.cfg.CgroupRoot, s.cfg.PodsCgroup, s.cfg.AllocatableMemoryBytes = l.CgroupRoot, pods, l.AllocatableMemoryBytes
	s.laidOut = true
	return nil
}

// NewCgroupStats validates cfg and fills defaults; it does no I/O.
func NewCgroupStats(cfg CgroupStatsConfig) (*CgroupStats, error) {
	var errs []error
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if !filepath.IsAbs(cfg.CgroupRoot) {
		errs = append(errs, fmt.Errorf("%w: CgroupRoot %q is not absolute", ErrInvalidConfig, cfg.CgroupRoot))
	}
	if !filepath.IsAbs(cfg.ProcRoot) {
		errs = append(errs, fmt.Errorf("%w: ProcRoot %q is not absolute", ErrInvalidConfig, cfg.ProcRoot))
	}
	if cfg.PodsCgroup != "" {
		p := strings.Trim(filepath.ToSlash(filepath.Clean("/"+cfg.PodsCgroup)), "/")
		if p == "" || strings.Contains(cfg.PodsCgroup, "..") {
			errs = append(errs, fmt.Errorf("%w: PodsCgroup %q is not a cgroup below the root", ErrInvalidConfig, cfg.PodsCgroup))
		}
		cfg.PodsCgroup = p
	}
	for _, d := range []struct{ name, path string }{{"PodLogsRoot", cfg.PodLogsRoot}, {"PodsDir", cfg.PodsDir}} {
		if d.path != "" && !filepath.IsAbs(d.path) {
			errs = append(errs, fmt.Errorf("%w: %s %q is not absolute", ErrInvalidConfig, d.name, d.path))
		}
	}
	if cfg.DiskUsagePeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: DiskUsagePeriod %v is negative", ErrInvalidConfig, cfg.DiskUsagePeriod))
	}
	if cfg.ImageFsPath != "" && cfg.NodeFsPath == "" {
		errs = append(errs, fmt.Errorf("%w: ImageFsPath is set without NodeFsPath", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.BackgroundDiskUsage && cfg.DiskUsagePeriod == 0 {
		cfg.DiskUsagePeriod = DefaultDiskUsagePeriod
	}
	return &CgroupStats{cfg: cfg, log: cfg.Logger.Named("eviction.stats"), statfs: statfs, du: duDir, laidOut: cfg.Layout == nil,
		wanted: map[string]time.Time{}, kick: make(chan struct{}, 1)}, nil
}

var _ StatsProvider = (*CgroupStats)(nil)

// hierarchy says where the memory and pids controllers are.
type hierarchy struct {
	v2           bool
	memory, pids string // hierarchy roots (the same on v2)
}

func (s *CgroupStats) detect() (hierarchy, error) {
	h, err := cgroupfs.Detect(s.cfg.CgroupRoot)
	if err != nil {
		return hierarchy{}, err
	}
	return hierarchy{v2: h.V2, memory: h.Memory, pids: h.Pids}, nil
}

// Summary reads one observation of the node and its pods.
func (s *CgroupStats) Summary(ctx context.Context) (*Summary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.layOut(); err != nil {
		return nil, err
	}
	h, err := s.detect()
	if err != nil {
		return nil, err
	}
	sum := &Summary{Time: s.cfg.Clock.Now()}
	memTotal, err := s.memTotal()
	if err != nil {
		return nil, err
	}
	nodeWS, err := s.nodeWorkingSet(h)
	if err != nil {
		return nil, err
	}
	sum.Memory = memoryStats(memTotal, nodeWS)

	if s.cfg.PodsCgroup != "" {
		podsDir := filepath.Join(h.memory, s.cfg.PodsCgroup)
		ws, err := cgroupWorkingSet(podsDir, h.v2)
		if err != nil {
			return nil, fmt.Errorf("pods cgroup: %w", err)
		}
		capacity := s.cfg.AllocatableMemoryBytes
		if capacity == 0 {
			limit, err := cgroupMemoryLimit(podsDir, h.v2)
			if err != nil {
				return nil, fmt.Errorf("pods cgroup: %w", err)
			}
			capacity = min(limit, memTotal)
		}
		sum.AllocatableMemory = memoryStats(capacity, ws)
		pods, err := s.pods(ctx, h)
		if err != nil {
			return nil, err
		}
		sum.Pods = pods
	}
	if s.diskStatsEnabled() {
		if sum.Pods, err = s.addDiskStats(ctx, sum.Pods); err != nil {
			return nil, err
		}
	}

	if s.cfg.NodeFsPath != "" {
		if sum.NodeFs, err = s.statfs(s.cfg.NodeFsPath); err != nil {
			return nil, fmt.Errorf("nodefs: %w", err)
		}
		if s.cfg.ImageFsPath != "" {
			if sum.ImageFs, err = s.statfs(s.cfg.ImageFsPath); err != nil {
				return nil, fmt.Errorf("imagefs: %w", err)
			}
		}
	}

	if sum.PID, err = s.pidStats(); err != nil {
		return nil, err
	}
	return sum, nil
}

// memoryStats: available = capacity - working set, never negative.
func memoryStats(capacity, workingSet uint64) *MemoryStats {
	avail := uint64(0)
	if capacity > workingSet {
		avail = capacity - workingSet
	}
	return &MemoryStats{AvailableBytes: avail, WorkingSetBytes: workingSet}
}

func (s *CgroupStats) memTotal() (uint64, error) { return cgroupfs.MemTotal(s.cfg.ProcRoot) }

func (s *CgroupStats) nodeWorkingSet(h hierarchy) (uint64, error) {
	if !h.v2 {
		ws, err := cgroupWorkingSet(h.memory, false)
		if err != nil {
			return 0, fmt.Errorf("root memory cgroup: %w", err)
		}
		return ws, nil
	}
	v, found, err := readKeyValues(filepath.Join(h.memory, "memory.stat"), "anon", "file", "inactive_file")
	if err != nil {
		return 0, fmt.Errorf("root memory cgroup: %w", err)
	}
	if !found[0] || !found[1] {
		return 0, fmt.Errorf("root memory cgroup: %s has no anon or file", filepath.Join(h.memory, "memory.stat"))
	}
	return sat(v[0]+v[1], v[2]), nil
}

// The readers are internal/cgroupfs's, shared with the stats package.
func sat(a, b uint64) uint64 { return cgroupfs.Sat(a, b) }

func cgroupWorkingSet(dir string, v2 bool) (uint64, error) { return cgroupfs.WorkingSet(dir, v2) }

func cgroupMemoryLimit(dir string, v2 bool) (uint64, error) { return cgroupfs.MemoryLimit(dir, v2) }

func readUint(file string) (uint64, error) { return cgroupfs.ReadUint(file) }

func readKeyValues(file string, keys ...string) ([]uint64, []bool, error) {
	return cgroupfs.ReadKeyValues(file, keys...)
}

// podUID returns the UID a pod cgroup directory is named for (see
// cgroupfs.PodUID).
func podUID(name string) (types.UID, bool) {
	uid, ok := cgroupfs.PodUID(name)
	return types.UID(uid), ok
}

// pods lists the pod cgroups directly under the pods cgroup and under its
// non-pod children (the QoS cgroups). A pod cgroup that vanishes while it
// is read is skipped.
func (s *CgroupStats) pods(ctx context.Context, h hierarchy) ([]PodStats, error) {
	list, err := cgroupfs.ListPodCgroups(h.memory, s.cfg.PodsCgroup)
	if err != nil {
		return nil, err
	}
	type podDir struct {
		uid types.UID
		rel string // relative to a hierarchy root
	}
	dirs := make([]podDir, 0, len(list))
	for _, c := range list {
		dirs = append(dirs, podDir{types.UID(c.UID), c.Rel})
	}
	out := make([]PodStats, 0, len(dirs))
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ws, err := cgroupWorkingSet(filepath.Join(h.memory, d.rel), h.v2)
		if err != nil {
			if cgroupfs.IsGone(err) {
				s.log.Debug("pod cgroup vanished while read", zap.String("uid", string(d.uid)))
				continue
			}
			return nil, fmt.Errorf("pod %s: %w", d.uid, err)
		}
		procs, err := s.podProcesses(h, d.rel)
		if err != nil {
			if cgroupfs.IsGone(err) {
				s.log.Debug("pod cgroup vanished while read", zap.String("uid", string(d.uid)))
				continue
			}
			return nil, fmt.Errorf("pod %s: %w", d.uid, err)
		}
		out = append(out, PodStats{UID: d.uid, MemoryWorkingSetBytes: ws, Processes: procs})
	}
	return out, nil
}

// podProcesses is pids.current when the pids controller has the pod, else
// the pids of cgroup.procs in the pod's memory cgroup and its descendants.
func (s *CgroupStats) podProcesses(h hierarchy, rel string) (uint64, error) {
	n, err := readUint(filepath.Join(h.pids, rel, "pids.current"))
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	dir := filepath.Join(h.memory, rel)
	if _, err := os.Stat(dir); err != nil {
		return 0, err
	}
	var count uint64
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil // a child cgroup went away
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		for _, l := range bytes.Fields(b) {
			if len(l) > 0 {
				count++
			}
		}
		return nil
	})
	return count, err
}

func (s *CgroupStats) pidStats() (*PIDStats, error) {
	maxPID, n, err := cgroupfs.PIDs(s.cfg.ProcRoot)
	if err != nil {
		return nil, err
	}
	return &PIDStats{MaxPID: maxPID, NumProcesses: n}, nil
}

// statfs measures the file system holding path.
func statfs(path string) (*FsStats, error) {
	s, err := cgroupfs.Statfs(path)
	if err != nil {
		return nil, err
	}
	return &FsStats{AvailableBytes: s.Available, CapacityBytes: s.Capacity, InodesFree: s.InodesFree, Inodes: s.Inodes}, nil
}
