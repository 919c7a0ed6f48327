package nodekit

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/syncloop"
)

// EvictionOptions tunes WithEvictionOptions.
type EvictionOptions struct {
	// ImageGC configures the image garbage collector the Builder makes
	// when the eviction Config has no ImageGC. Images, InUse, Clock,
	// Logger and Registerer are filled from the agent when unset (InUse:
	// the images of every container and sandbox, and the sandbox image
	// the runtime's verbose Status names, so the pause image is kept
	// without setting SandboxImage); FsStats
	// defaults to the eviction stats' image file system (or node file
	// system when images share it). Zero thresholds and ages mean the
	// kubelet's defaults (85/80, 2m).
	ImageGC imagegc.Config
	// ContainerGCPolicy is the policy of the runtime garbage collection
	// the eviction manager runs under disk pressure when the eviction
	// Config has no ContainerGC; EvictNonDeletedPods is always set, as the
	// kubelet does. The zero value is the kubelet's default policy.
	ContainerGCPolicy kubetypes.GCPolicy
	// MemcgNotifier adds, when a container manager is wired and the
	// eviction Config has no Notifiers, a memcg threshold notifier
	// (eviction.MemcgNotifier) for each memory.available and
	// allocatableMemory.available threshold: a crossing runs a cycle at
	// once instead of at the next Interval.
	MemcgNotifier bool
	// DiskUsagePeriod is the period of the background walker that
	// measures pod log directories and emptyDir volumes when the Builder
	// makes the eviction Stats (eviction.CgroupStatsConfig
	// BackgroundDiskUsage): the cycles never walk, so a pod with millions
	// of files cannot delay a memory eviction. 0 means
	// eviction.DefaultDiskUsagePeriod (10 s).
	DiskUsagePeriod time.Duration
	// Built, if not nil, is filled in by Build with what it made, so the
	// caller can feed the pressure conditions to node status
	// (nodestatus.SettersConfig.Pressure = Built.Manager) or call the
	// managers directly.
	Built *EvictionParts
}

// EvictionParts are the parts WithEvictionOptions made.
type EvictionParts struct {
	// Manager is the eviction manager; it implements
	// nodestatus.PressureSource.
	Manager *eviction.Manager
	// ImageGC is the image garbage collector the Builder made, or nil when
	// the eviction Config brought its own ImageGC or the runtime has no
	// image listing.
	ImageGC *imagegc.Manager

	// stats is the CgroupStats the Builder made (nil when the eviction
	// Config brought its own Stats): its disk walker runs with the agent.
	stats *eviction.CgroupStats
}

// WithEviction wires node-pressure eviction in one call, with the default
// EvictionOptions. See WithEvictionOptions.
func (b *Builder) WithEviction(cfg eviction.Config) *Builder {
	return b.WithEvictionOptions(cfg, EvictionOptions{})
}

// WithEvictionOptions wires node-pressure eviction: the eviction manager
// runs its cycle for the agent's life, evicts pods through the pod workers
// (the kill waits for the containers to stop, and the pod's final status
// is the eviction's: phase Failed, reason Evicted), and admission rejects
// the pods the node can't take under pressure. What cfg leaves unset the
// Builder fills in from the agent:
//   - ActivePods: the agent's active pods;
//   - KillPod: kill through the pod workers with the eviction status;
//   - ContainerGC: the runtime's garbage collection (opts.ContainerGCPolicy
//     with EvictNonDeletedPods);
//   - ImageGC: an imagegc.Manager over the agent's runtime, which also runs
//     its own collection every 5 minutes;
//   - Stats: eviction.CgroupStats over the container manager's pods cgroup
//     (memory, allocatable memory, pods, PIDs), the agent's root
//     directory (nodefs), its pod logs and pods directory and the
//     runtime's container stats (disk use per pod; the directories
//     measured by a background walker every opts.DiskUsagePeriod), when
//     cmwire.ContainerManager was called (before or after); without a
//     container manager Stats is required;
//   - Clock, Logger and Registerer: the Builder's.
//
// EnforceAllocatable is set when the container manager limits the pods
// cgroup to node allocatable (its EnforceNodeAllocatable has "pods", the
// default), so each hard memory.available threshold gets its
// allocatableMemory.available twin, as in the kubelet.
//
// The manager implements nodestatus.PressureSource; opts.Built gives it to
// the caller.
func (b *Builder) WithEvictionOptions(cfg eviction.Config, opts EvictionOptions) *Builder {
	if b.withEviction {
		return b.fail("WithEviction given twice")
	}
	b.withEviction = true
	w := &evictionWiring{cfg: cfg, opts: opts}
	b.wired = append(b.wired, wiring{rank: rankEviction, beforeLoop: w.beforeLoop, loop: w.loop, connect: w.connect})
	return b
}

// evictionWiring makes the eviction manager (and its image GC) before the
// sync loop, whose admission asks it.
type evictionWiring struct {
	cfg   eviction.Config
	opts  EvictionOptions
	parts *EvictionParts
}

func (w *evictionWiring) beforeLoop(bd *build) {
	parts, err := bd.b.buildEviction(bd.a, w.cfg, w.opts)
	if err != nil {
		bd.fail(err)
		return
	}
	bd.a.eviction.Store(parts.Manager)
	w.parts = &parts
	if w.opts.Built != nil {
		*w.opts.Built = parts
	}
}

func (w *evictionWiring) loop(_ *build, cfg *syncloop.Config) {
	if w.parts != nil {
		cfg.Admitters = append(cfg.Admitters, admitWith(w.parts.Manager.Admit))
	}
}

func (w *evictionWiring) connect(bd *build) {
	if w.parts.ImageGC != nil {
		bd.a.parts = append(bd.a.parts, extraPart{name: "imagegc", run: w.parts.ImageGC.Run})
	}
	if w.parts.stats != nil {
		bd.a.parts = append(bd.a.parts, extraPart{name: "eviction-disk-walker", run: w.parts.stats.Run})
	}
	bd.a.parts = append(bd.a.parts, extraPart{name: "eviction", run: w.parts.Manager.Run})
}

func (b *settings) buildEviction(a *Agent, cfg eviction.Config, opts EvictionOptions) (EvictionParts, error) {
	var parts EvictionParts
	if cfg.Clock == nil {
		cfg.Clock = a.clock
	}
	if cfg.Logger == nil {
		cfg.Logger = b.logger
	}
	if cfg.Registerer == nil {
		cfg.Registerer = b.registerer
	}
	if cfg.ActivePods == nil {
		cfg.ActivePods = a.ActivePods
	}
	if cfg.Recorder == nil {
		cfg.Recorder = a.recorder
	}
	if cfg.NodeName == "" {
		cfg.NodeName = b.nodeName
	}
	if cfg.KillPod == nil {
		cfg.KillPod = a.evictPod
	}
	if cfg.ContainerGC == nil && a.mgr != nil {
		policy := opts.ContainerGCPolicy
		policy.EvictNonDeletedPods = true
		cfg.ContainerGC = containerGC{a: a, policy: policy}
	}
	if cm := b.podCgroups; cm != nil && cm.EnforcesPodsAllocatable() {
		// The pods cgroup is limited to allocatable: watch it as the
		// kubelet does, without a second setting.
		cfg.EnforceAllocatable = true
	}
	if cfg.Stats == nil {
		cm := b.podCgroups
		if cm == nil {
			return parts, configErr("eviction", "Stats is required when no container manager was wired (cmwire.ContainerManager)")
		}
		logs := b.podLogsRoot
		if logs == "" {
			logs = filepath.Join(b.rootDir, "pod-logs")
		}
		scfg := eviction.CgroupStatsConfig{
			NodeFsPath: b.rootDir, PodLogsRoot: logs, PodsDir: filepath.Join(b.rootDir, syncloop.PodsDirName),
			Layout: containerMgrLayout(cm), Clock: cfg.Clock, Logger: cfg.Logger,
			BackgroundDiskUsage: true, DiskUsagePeriod: opts.DiskUsagePeriod,
		}
		if l, ok := a.cri.(eviction.ContainerStatsLister); ok {
			scfg.ContainerStats = l
		}
		st, err := eviction.NewCgroupStats(scfg)
		if err != nil {
			return parts, partErr("eviction stats", err)
		}
		cfg.Stats, parts.stats = st, st
	}
	if cm := b.podCgroups; cm != nil && opts.MemcgNotifier && len(cfg.Notifiers) == 0 {
		ts := cfg.Thresholds
		if cfg.EnforceAllocatable {
			ts = eviction.WithAllocatableThresholds(ts)
		}
		for _, t := range ts {
			if t.Signal == eviction.SignalMemoryAvailable || t.Signal == eviction.SignalAllocatableMemoryAvailable {
				n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
					Threshold: t, Layout: cm.MemoryCgroupPaths, Clock: cfg.Clock, Logger: cfg.Logger,
				})
				if err != nil {
					return parts, partErr("eviction memcg notifier", err)
				}
				cfg.Notifiers = append(cfg.Notifiers, n)
			}
		}
	}
	if cfg.ImageGC == nil && a.cri != nil {
		gc, err := b.buildImageGC(a, cfg, opts.ImageGC)
		if err != nil {
			return parts, err
		}
		if gc != nil {
			cfg.ImageGC, parts.ImageGC = gc, gc
		}
	}
	m, err := eviction.New(cfg)
	if err != nil {
		return parts, partErr("eviction", err)
	}
	parts.Manager = m
	return parts, nil
}

// buildImageGC makes the image garbage collector over the agent's runtime;
// nil when the runtime can't list or remove images.
func (b *settings) buildImageGC(a *Agent, ecfg eviction.Config, icfg imagegc.Config) (*imagegc.Manager, error) {
	if icfg.Images == nil {
		is, ok := a.cri.(imagegc.ImageService)
		if !ok {
			a.log.Warn("the runtime cannot list or remove images: no image garbage collection")
			return nil, nil
		}
		icfg.Images = is
	}
	if icfg.InUse == nil {
		// Every container's image, every sandbox's image, and the sandbox
		// image the runtime is configured with: a node without pods keeps
		// its pause image also on runtimes that pin none (containerd 1.6).
		inUse := []imagegc.InUse{imagegc.Containers(a.cri)}
		if l, ok := a.cri.(imagegc.SandboxLister); ok {
			inUse = append(inUse, imagegc.Sandboxes(l))
		}
		if s, ok := a.cri.(imagegc.RuntimeStatuser); ok {
			inUse = append(inUse, imagegc.RuntimeSandboxImage(s))
		}
		icfg.InUse = imagegc.Union(inUse...)
	}
	if icfg.FsStats == nil {
		stats := ecfg.Stats
		icfg.FsStats = func(ctx context.Context) (uint64, uint64, error) {
			s, err := stats.Summary(ctx)
			if err != nil {
				return 0, 0, err
			}
			fs := s.ImageFs
			if fs == nil {
				fs = s.NodeFs
			}
			if fs == nil {
				return 0, 0, errors.New("the eviction stats report no image or node file system")
			}
			return fs.CapacityBytes, fs.AvailableBytes, nil
		}
	}
	if icfg.Clock == nil {
		icfg.Clock = ecfg.Clock
	}
	if icfg.Logger == nil {
		icfg.Logger = ecfg.Logger
	}
	if icfg.Registerer == nil {
		icfg.Registerer = ecfg.Registerer
	}
	if icfg.Recorder == nil {
		icfg.Recorder, icfg.NodeName = ecfg.Recorder, ecfg.NodeName
	}
	gc, err := imagegc.New(icfg)
	if err != nil {
		return nil, partErr("imagegc", err)
	}
	return gc, nil
}

// evictPod kills pod through its pod worker and waits for its containers
// to stop; the pod's final status carries the eviction's phase, reason,
// message and conditions.
func (a *Agent) evictPod(ctx context.Context, pod *v1.Pod, status v1.PodStatus, grace int64) error {
	if a.loop == nil {
		return errors.New("nodekit: no sync loop")
	}
	g := grace
	return a.loop.PodWorkers().KillPodAndWait(ctx, pod, true, &g, func(s *v1.PodStatus) {
		podstatus.ApplyKillStatus(s, status)
	})
}

// containerGC is eviction's container reclaim: the runtime's garbage
// collection, also removing what belongs to pods that are stopped but not
// deleted.
type containerGC struct {
	a      *Agent
	policy kubetypes.GCPolicy
}

func (g containerGC) DeleteAllUnusedContainers(ctx context.Context) error {
	var pods kubetypes.PodStateProvider
	if g.a.loop != nil {
		pods = g.a.loop.PodWorkers()
	}
	return g.a.mgr.GarbageCollect(ctx, g.policy, pods, g.a.sourcesReady())
}

// containerMgrLayout is where eviction's cgroup stats read: the container
// manager's memory cgroups and allocatable memory, known once it started.
func containerMgrLayout(cm PodCgroups) func() (eviction.CgroupLayout, error) {
	return func() (eviction.CgroupLayout, error) {
		root, pods, err := cm.MemoryCgroupPaths()
		if err != nil {
			return eviction.CgroupLayout{}, err
		}
		l := eviction.CgroupLayout{CgroupRoot: root, PodsCgroup: pods}
		if q, ok := cm.NodeAllocatable()[v1.ResourceMemory]; ok && q.Sign() > 0 {
			l.AllocatableMemoryBytes = uint64(q.Value())
		}
		return l, nil
	}
}
