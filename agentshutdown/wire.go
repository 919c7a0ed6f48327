package agentshutdown

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/nodeshutdown"
	"github.com/nodekit/nodekit/syncloop"
)

// ErrNotBuilt: the Handle's agent has not been built yet.
var ErrNotBuilt = errors.New("agentshutdown: the agent is not built")

// Config configures Wire.
type Config struct {
	// Shutdown holds the grace periods (GracePeriod and
	// GracePeriodCriticalPods, or GracePeriodByPodPriority) and optionally
	// WaitForUnmount (the *volumemgr.Manager given to WithVolumeManager),
	// Registerer and Logger. Wire fills ActivePods, KillPod, OnChange,
	// NodeName, Recorder and Clock from the agent (those set are kept),
	// and, with a Registerer, StateDir with the agent's root directory
	// (as the kubelet keeps its state file when its metrics are on).
	Shutdown nodeshutdown.Config
	// Watchers start the shutdown when the machine says so: each is made
	// from the built Manager and runs with the agent (a watcher that
	// returns early stops the agent). nodeshutdown/systemd.Watcher is
	// logind's; none means the embedding program calls Handle.Shutdown.
	Watchers []Watcher
}

// A Watcher makes, from the built Manager, a part that tells it when the
// node shuts down (Manager.Shutdown, Manager.CancelShutdown).
type Watcher func(m *nodeshutdown.Manager) (run func(ctx context.Context) error, err error)

// Handle reaches the Manager Wire made, once the agent is built.
type Handle struct {
	m atomic.Pointer[nodeshutdown.Manager]
}

// Manager is the built Manager, nil before Build.
func (h *Handle) Manager() *nodeshutdown.Manager { return h.m.Load() }

// Shutdown runs the node's graceful shutdown and returns when it is done
// (nodeshutdown.Manager.Shutdown): for machines without logind, the
// embedding program calls it when the machine is about to power off.
func (h *Handle) Shutdown(ctx context.Context) error {
	m := h.m.Load()
	if m == nil {
		return ErrNotBuilt
	}
	return m.Shutdown(ctx)
}

// Wire adds the graceful node shutdown to b and returns the Handle to
// start it with. What the agent gives: the active pods, the kill through
// the pod workers (as an eviction's, but not counted as one), the node
// name, events, clock; the agent's admission refuses every pod during the
// shutdown, its node status (clusterapiserver.Wire) reports Ready False
// with "node is shutting down" and is updated at once when the shutdown
// starts or is cancelled. The Manager runs as a part of the agent
// (Manager.Request starts a shutdown from anywhere), with cfg.Watchers
// after it. Config errors fail Build.
func Wire(b *nodekit.Builder, cfg Config) *Handle {
	h := &Handle{}
	b.WithAdmitHandler(syncloop.AdmitFunc(func(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
		m := h.m.Load()
		if m == nil {
			return syncloop.AdmitResult{Admit: true}
		}
		ok, reason, msg := m.Admit(pod, active)
		return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
	}))
	b.WithNodeReadyCheck(func() error {
		if m := h.m.Load(); m != nil {
			return m.ShutdownStatus()
		}
		return nil
	})
	b.WithAgentPart("nodeshutdown", func(a *nodekit.Agent) (func(ctx context.Context) error, error) {
		m, err := nodeshutdown.New(ManagerConfig(a, cfg.Shutdown))
		if err != nil {
			return nil, err
		}
		h.m.Store(m)
		return m.Run, nil
	})
	for i, w := range cfg.Watchers {
		name := fmt.Sprintf("nodeshutdown watcher %d", i)
		b.WithAgentPart(name, func(*nodekit.Agent) (func(ctx context.Context) error, error) {
			m := h.m.Load()
			if m == nil {
				return nil, errors.New("agentshutdown: no manager (its config is invalid)")
			}
			if w == nil {
				return nil, errors.New("agentshutdown: nil Watcher")
			}
			return w(m)
		})
	}
	return h
}

// ManagerConfig returns cfg with the fields an Agent gives filled in
// (those already set are kept).
func ManagerConfig(a *nodekit.Agent, cfg nodeshutdown.Config) nodeshutdown.Config {
	if cfg.ActivePods == nil {
		cfg.ActivePods = a.ActivePods
	}
	if cfg.KillPod == nil && a.Loop() != nil {
		workers := a.Loop().PodWorkers()
		cfg.KillPod = func(ctx context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) error {
			return workers.KillPodAndWait(ctx, pod, false, &grace, status)
		}
	}
	if cfg.OnChange == nil {
		cfg.OnChange = a.RequestNodeStatusUpdate
	}
	if cfg.NodeName == "" {
		cfg.NodeName = a.NodeName()
	}
	if cfg.Recorder == nil {
		cfg.Recorder = a.EventRecorder()
	}
	if cfg.Clock == nil {
		cfg.Clock = a.Clock()
	}
	if cfg.StateDir == "" && cfg.Registerer != nil {
		cfg.StateDir = a.RootDir()
	}
	return cfg
}
