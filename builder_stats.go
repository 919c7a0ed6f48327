package nodekit

import (
	"path/filepath"

	"github.com/nodekit/nodekit/stats"
	"github.com/nodekit/nodekit/syncloop"
)

// WithStats makes the agent's stats provider (the kubelet's
// /stats/summary and, through stats.NewResourceCollector,
// /metrics/resource) and stores it in *out when Build succeeds; the node
// API server reads it. What cfg leaves unset the Builder fills in:
//   - NodeName, Clock and Logger: the Builder's;
//   - Runtime: the agent's CRI (it must have ListContainerStats; its
//     ListPodSandboxStats and ImageFsInfo are used when it has them);
//   - Pods: the runtime engine's running pods (kuberuntime.Manager.GetPods);
//   - Layout: the container manager's cgroup root and pods cgroup, when
//     cmwire.ContainerManager was called and cfg sets neither Layout nor
//     CgroupRoot (without either the summary has no cgroup stats);
//   - NodeFsPath: the agent's root directory; PodLogsRoot: its pod logs;
//     PodsDir: its pods directory (emptyDir volumes).
func (b *Builder) WithStats(cfg stats.Config, out **stats.Provider) *Builder {
	if out == nil {
		return b.fail("WithStats needs a place for the provider (out is nil)")
	}
	if b.withStats {
		return b.fail("WithStats given twice")
	}
	b.withStats = true
	b.wired = append(b.wired, wiring{rank: rankStats, connect: func(bd *build) {
		p, err := bd.buildStats(cfg)
		if err != nil {
			bd.fail(err)
			return
		}
		*out = p
	}})
	return b
}

func (bd *build) buildStats(cfg stats.Config) (*stats.Provider, error) {
	b, a := bd.b, bd.a
	if cfg.NodeName == "" {
		cfg.NodeName = b.nodeName
	}
	if cfg.Clock == nil {
		cfg.Clock = bd.clk
	}
	if cfg.Logger == nil {
		cfg.Logger = bd.log
	}
	if cfg.Runtime == nil {
		l, ok := a.cri.(stats.ContainerStatsLister)
		if !ok {
			return nil, configErr("stats", "the runtime has no ListContainerStats; set Runtime")
		}
		cfg.Runtime = l
	}
	if cfg.Pods == nil && a.mgr != nil {
		cfg.Pods = a.mgr
	}
	if cm := b.podCgroups; cm != nil && cfg.Layout == nil && cfg.CgroupRoot == "" {
		cfg.Layout = func() (stats.CgroupLayout, error) {
			root, pods, err := cm.MemoryCgroupPaths()
			return stats.CgroupLayout{CgroupRoot: root, PodsCgroup: pods}, err
		}
	}
	if cfg.NodeFsPath == "" {
		cfg.NodeFsPath = b.rootDir
	}
	if cfg.PodLogsRoot == "" {
		cfg.PodLogsRoot = bd.logsRoot
	}
	if cfg.PodsDir == "" && b.rootDir != "" {
		cfg.PodsDir = filepath.Join(b.rootDir, syncloop.PodsDirName)
	}
	p, err := stats.New(cfg)
	if err != nil {
		return nil, partErr("stats", err)
	}
	return p, nil
}
