package nodekit

import (
	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// WithContainerLogRotation sets how containers' logs are rotated
// (kuberuntime/logs.Config: MaxSize, MaxFiles, MonitorInterval, Workers;
// the Builder fills Runtime, Clock and Logger). Rotation is on by default,
// with the kubelet's settings (10 MiB, 5 files, every 10 s, 1 worker),
// for a runtime reached over the CRI (WithRuntimeEndpoint); this option
// turns it on for any runtime that has ReopenContainerLog, and a negative
// MaxSize turns it off.
func (b *Builder) WithContainerLogRotation(cfg logs.Config) *Builder {
	b.logRotation = &cfg
	return b
}

// LogRotation returns the container log rotation, or nil when it is off.
func (a *Agent) LogRotation() *logs.Manager { return a.logRotation }

// buildLogRotation makes the log rotation and lists it among the parts.
func (bd *build) buildLogRotation() {
	b := bd.b
	var cfg logs.Config
	switch {
	case b.logRotation != nil:
		cfg = *b.logRotation
	case isRemote(bd.cri):
	default:
		return
	}
	if cfg.MaxSize < 0 {
		return
	}
	rt, ok := bd.driven.(logs.RuntimeService)
	if !ok {
		rt, ok = bd.cri.(logs.RuntimeService)
	}
	if !ok {
		if b.logRotation != nil {
			bd.fail(configErr("builder", "WithContainerLogRotation: the runtime has no ReopenContainerLog"))
		}
		return
	}
	cfg.Runtime, cfg.Clock, cfg.Logger = rt, bd.clk, bd.log
	m, err := logs.New(cfg)
	if err != nil {
		bd.fail(partErr("container log rotation", err))
		return
	}
	bd.a.logRotation = m
	bd.a.parts = append(bd.a.parts, extraPart{name: "container log rotation", run: m.Run})
}

func isRemote(cri CRI) bool {
	_, ok := cri.(*remote.Client)
	return ok
}
