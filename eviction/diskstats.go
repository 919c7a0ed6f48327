package eviction

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStatsLister is the part of a CRI runtime client that CgroupStats
// uses: the stats of every container (the CRI RuntimeService's
// ListContainerStats, which runtime/remote's Client has).
type ContainerStatsLister interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// The labels every kubelet-compatible agent (nodekit's runtime included)
// puts on a pod's containers; redeclared here so that eviction does not
// import the runtime package.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// emptyDirDir is the directory of emptyDir volumes under
// <PodsDir>/<uid>/volumes: the plugin name "kubernetes.io/empty-dir"
// escaped as the kubelet escapes it.
const emptyDirDir = "kubernetes.io~empty-dir"

// diskUsage is the space (allocated blocks) and inodes of a tree.
type diskUsage struct{ Bytes, Inodes uint64 }

func (u *diskUsage) add(v diskUsage) {
	u.Bytes += v.Bytes
	u.Inodes += v.Inodes
}

func (s *CgroupStats) diskStatsEnabled() bool {
	return s.cfg.ContainerStats != nil || s.cfg.PodLogsRoot != "" || s.cfg.PodsDir != ""
}

// podSet indexes the pods of a summary by UID while it is filled.
type podSet struct {
	pods  []PodStats
	index map[types.UID]int
}

func (p *podSet) get(uid types.UID) *PodStats {
	if i, ok := p.index[uid]; ok {
		return &p.pods[i]
	}
	return nil
}

func (p *podSet) add(uid types.UID) *PodStats {
	p.index[uid] = len(p.pods)
	p.pods = append(p.pods, PodStats{UID: uid})
	return &p.pods[len(p.pods)-1]
}

// container returns the pod's container named name, adding it if needed.
func container(p *PodStats, name string) *ContainerStats {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	p.Containers = append(p.Containers, ContainerStats{Name: name})
	return &p.Containers[len(p.Containers)-1]
}

// addDiskStats fills the disk usage and the containers of pods (the pods
// found in the cgroups), adding the pods that only CRI stats know. A
// failing CRI call or a directory that cannot be measured is logged and
// leaves its part empty; only ctx's end is an error.
func (s *CgroupStats) addDiskStats(ctx context.Context, pods []PodStats) ([]PodStats, error) {
	set := &podSet{pods: pods, index: make(map[types.UID]int, len(pods))}
	for i := range pods {
		set.index[pods[i].UID] = i
	}
	if s.cfg.ContainerStats != nil {
		if err := s.addCRIStats(ctx, set); err != nil {
			return nil, err
		}
	}
	if s.cfg.PodLogsRoot != "" {
		if err := s.addLogStats(ctx, set); err != nil {
			return nil, err
		}
	}
	if s.cfg.PodsDir != "" {
		if err := s.addVolumeStats(ctx, set); err != nil {
			return nil, err
		}
	}
	if s.cfg.DiskUsagePeriod > 0 && !s.cfg.BackgroundDiskUsage {
		s.pruneDiskCache(s.cfg.Clock.Now().Add(-2 * s.cfg.DiskUsagePeriod))
	}
	for i := range set.pods {
		slices.SortFunc(set.pods[i].Containers, func(a, b ContainerStats) int { return strings.Compare(a.Name, b.Name) })
	}
	return set.pods, nil
}

// addCRIStats adds each container's writable layer and working set. Of
// several instances of a container (restarts not yet collected) only the
// latest counts (the highest attempt; on a tie, a running one), as the
// kubelet keeps only the latest.
// Pods with no cgroup get their containers' working set as theirs.
func (s *CgroupStats) addCRIStats(ctx context.Context, set *podSet) error {
	stats, err := s.cfg.ContainerStats.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("CRI container stats failed: pod disk usage is without writable layers", zap.Error(err))
		return nil
	}
	type key struct {
		uid  types.UID
		name string
	}
	latest := make(map[key]*runtimeapi.ContainerStats, len(stats))
	for _, st := range stats {
		attr := st.GetAttributes()
		uid := types.UID(attr.GetLabels()[labelPodUID])
		name := attr.GetLabels()[labelContainerName]
		if name == "" {
			name = attr.GetMetadata().GetName()
		}
		if uid == "" || name == "" {
			continue // not a pod's container
		}
		k := key{uid, name}
		if old, ok := latest[k]; !ok || newer(st, old) {
			latest[k] = st
		}
	}
	keys := make([]key, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	// Pods added here come after the cgroup pods, in UID order.
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(string(a.uid), string(b.uid)), strings.Compare(a.name, b.name))
	})
	criOnly := map[types.UID]bool{}
	for _, k := range keys {
		st := latest[k]
		p := set.get(k.uid)
		if p == nil {
			p = set.add(k.uid)
			criOnly[k.uid] = true
		}
		ws := st.GetMemory().GetWorkingSetBytes().GetValue()
		layer := st.GetWritableLayer()
		c := container(p, k.name)
		c.MemoryWorkingSetBytes = ws
		c.RootfsBytes = layer.GetUsedBytes().GetValue()
		p.RootfsBytes += c.RootfsBytes
		p.RootfsInodes += layer.GetInodesUsed().GetValue()
		if criOnly[k.uid] {
			p.MemoryWorkingSetBytes += ws
		}
	}
	return nil
}

// newer: a has the higher attempt, or the same one (a pod's sandbox was
// recreated) and a working set where b has none (a runs, b exited).
func newer(a, b *runtimeapi.ContainerStats) bool {
	aa, ba := a.GetAttributes().GetMetadata().GetAttempt(), b.GetAttributes().GetMetadata().GetAttempt()
	if aa != ba {
		return aa > ba
	}
	return a.GetMemory().GetWorkingSetBytes().GetValue() > 0 && b.GetMemory().GetWorkingSetBytes().GetValue() == 0
}

// addLogStats measures each known pod's log directory,
// <PodLogsRoot>/<namespace>_<name>_<uid>, and in it each container's
// directory.
func (s *CgroupStats) addLogStats(ctx context.Context, set *podSet) error {
	entries, err := os.ReadDir(s.cfg.PodLogsRoot)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("pod log directories not measured", zap.Error(err))
		}
		return nil
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		parts := strings.Split(e.Name(), "_")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			continue
		}
		p := set.get(types.UID(parts[2]))
		if p == nil {
			continue // not a pod of this summary
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := filepath.Join(s.cfg.PodLogsRoot, e.Name())
		total, truncated, err := s.measure(ctx, dir, func(name string, isDir bool, u diskUsage) {
			if isDir {
				container(p, name).LogsBytes = u.Bytes
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, errNotWalkedYet) {
				s.logDuError(p.UID, dir, err)
			}
			continue
		}
		if truncated {
			s.log.Debug("pod log directory too deep, measured in part", zap.String("dir", dir))
		}
		p.LogsBytes, p.LogsInodes = total.Bytes, total.Inodes
	}
	return nil
}

// addVolumeStats measures each known pod's emptyDir volumes,
// <PodsDir>/<uid>/volumes/kubernetes.io~empty-dir/<volume>. A volume on
// another file system than its parent directory (medium Memory: a tmpfs
// mounted there) holds no node disk and is skipped.
func (s *CgroupStats) addVolumeStats(ctx context.Context, set *podSet) error {
	for i := range set.pods {
		p := &set.pods[i]
		if !safeSegment(string(p.UID)) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := filepath.Join(s.cfg.PodsDir, string(p.UID), "volumes", emptyDirDir)
		var vols diskUsage
		var each []VolumeStats
		_, truncated, err := s.measure(ctx, dir, func(name string, isDir bool, u diskUsage) {
			if isDir {
				vols.add(u)
				each = append(each, VolumeStats{Name: name, UsedBytes: u.Bytes, Inodes: u.Inodes})
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotWalkedYet) {
				s.logDuError(p.UID, dir, err)
			}
			continue
		}
		if truncated {
			s.log.Debug("emptyDir volume too deep, measured in part", zap.String("dir", dir))
		}
		p.VolumeBytes, p.VolumeInodes, p.Volumes = vols.Bytes, vols.Inodes, each
	}
	return nil
}

// duResult is one measured directory, kept for DiskUsagePeriod (or, with
// BackgroundDiskUsage, until the next walk).
type duResult struct {
	at        time.Time
	seen      time.Time // the last Summary that asked for it
	total     diskUsage
	truncated bool
	children  []duChild
	err       error // the walk's error (BackgroundDiskUsage only)
}

// errNotWalkedYet: with BackgroundDiskUsage, the directory has not been
// walked yet.
var errNotWalkedYet = errors.New("eviction: directory not walked yet")

// DefaultDiskUsagePeriod is the background walker's period when
// CgroupStatsConfig.DiskUsagePeriod is 0.
const DefaultDiskUsagePeriod = 10 * time.Second

type duChild struct {
	name  string
	isDir bool
	u     diskUsage
}

// measure walks dir (see duDir), or replays its last walk when that is
// younger than DiskUsagePeriod. Failed walks are not kept.
func (s *CgroupStats) measure(ctx context.Context, dir string, child func(name string, isDir bool, u diskUsage)) (diskUsage, bool, error) {
	if s.cfg.BackgroundDiskUsage {
		return s.lastWalk(dir, child)
	}
	period := s.cfg.DiskUsagePeriod
	if period <= 0 {
		return s.du(ctx, dir, child)
	}
	now := s.cfg.Clock.Now()
	s.duMu.Lock()
	r, ok := s.duCache[dir]
	if ok && now.Sub(r.at) < period && !now.Before(r.at) {
		r.seen = now
		s.duCache[dir] = r
		s.duMu.Unlock()
		for _, c := range r.children {
			child(c.name, c.isDir, c.u)
		}
		return r.total, r.truncated, nil
	}
	s.duMu.Unlock()
	r = duResult{at: now, seen: now}
	var err error
	r.total, r.truncated, err = s.du(ctx, dir, func(name string, isDir bool, u diskUsage) {
		r.children = append(r.children, duChild{name, isDir, u})
		child(name, isDir, u)
	})
	s.duMu.Lock()
	defer s.duMu.Unlock()
	if err != nil {
		delete(s.duCache, dir)
		return diskUsage{}, false, err
	}
	if s.duCache == nil {
		s.duCache = map[string]duResult{}
	}
	s.duCache[dir] = r
	return r.total, r.truncated, nil
}

// pruneDiskCache forgets the directories no Summary asked for since
// before cutoff (pods gone).
func (s *CgroupStats) pruneDiskCache(cutoff time.Time) {
	s.duMu.Lock()
	defer s.duMu.Unlock()
	for dir, r := range s.duCache {
		if r.seen.Before(cutoff) {
			delete(s.duCache, dir)
		}
	}
}

func (s *CgroupStats) logDuError(uid types.UID, dir string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		s.log.Debug("directory vanished while measured", zap.String("uid", string(uid)), zap.String("dir", dir))
		return
	}
	s.log.Warn("disk usage not measured", zap.String("uid", string(uid)), zap.String("dir", dir), zap.Error(err))
}

// safeSegment: s can be one path segment (a UID from a cgroup or CRI
// label is not trusted to be one).
func safeSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`) && !strings.ContainsRune(s, 0)
}

// lastWalk replays the background walker's last walk of dir and marks dir
// wanted; a directory without a walk wakes the walker.
func (s *CgroupStats) lastWalk(dir string, child func(name string, isDir bool, u diskUsage)) (diskUsage, bool, error) {
	now := s.cfg.Clock.Now()
	s.duMu.Lock()
	s.wanted[dir] = now
	r, ok := s.duCache[dir]
	s.duMu.Unlock()
	if !ok {
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return diskUsage{}, false, errNotWalkedYet
	}
	if r.err != nil {
		return diskUsage{}, false, r.err
	}
	for _, c := range r.children {
		child(c.name, c.isDir, c.u)
	}
	return r.total, r.truncated, nil
}

// Run is the background disk walker (CgroupStatsConfig.BackgroundDiskUsage):
// every DiskUsagePeriod it walks each directory a Summary asked for in the
// last two periods (and forgets the others: pods gone), and at once each
// newly asked-for one. Without BackgroundDiskUsage it only waits. It
// returns nil when ctx ends. See package lifecycle for the contract; a
// second call returns ErrAlreadyRan.
func (s *CgroupStats) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	if !s.cfg.BackgroundDiskUsage {
		<-ctx.Done()
		return nil
	}
	t := s.cfg.Clock.NewTimer(s.cfg.DiskUsagePeriod)
	defer t.Stop()
	full := true
	for {
		s.WalkOnce(ctx, full)
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			full = false
		case <-t.C():
			t.Reset(s.cfg.DiskUsagePeriod)
			full = true
		}
	}
}

// WalkOnce is one pass of the background walker: it walks the wanted
// directories (with all false, only those not walked yet) and forgets
// those no Summary asked for in two periods. Run calls it; a test may.
func (s *CgroupStats) WalkOnce(ctx context.Context, all bool) {
	now := s.cfg.Clock.Now()
	cutoff := now.Add(-2 * s.cfg.DiskUsagePeriod)
	s.duMu.Lock()
	var dirs []string
	for dir, at := range s.wanted {
		if at.Before(cutoff) {
			delete(s.wanted, dir)
			delete(s.duCache, dir)
			continue
		}
		if _, ok := s.duCache[dir]; all || !ok {
			dirs = append(dirs, dir)
		}
	}
	s.duMu.Unlock()
	slices.Sort(dirs)
	for _, dir := range dirs {
		if ctx.Err() != nil {
			return
		}
		r := duResult{at: now, seen: now}
		r.total, r.truncated, r.err = s.du(ctx, dir, func(name string, isDir bool, u diskUsage) {
			r.children = append(r.children, duChild{name, isDir, u})
		})
		if r.err != nil && ctx.Err() != nil {
			return
		}
		if r.err != nil && !errors.Is(r.err, fs.ErrNotExist) {
			s.log.Warn("disk usage not measured", zap.String("dir", dir), zap.Error(r.err))
		}
		s.duMu.Lock()
		if s.duCache == nil {
			s.duCache = map[string]duResult{}
		}
		if _, still := s.wanted[dir]; still {
			s.duCache[dir] = r
		}
		s.duMu.Unlock()
	}
}
