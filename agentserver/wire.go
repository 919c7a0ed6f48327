package agentserver

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/stats"
)

// Config configures Wire: Server holds what the agent cannot give (the
// node's name, authentication and authorization, TLS, ports, limits,
// metrics registry, stats, configz); Wire fills the rest from the built
// Agent. Set Server.HealthzPort to server.DefaultHealthzPort for the
// kubelet's localhost health port.
type Config struct {
	Server server.Config
	// Stats, when set, gives the server the agent's stats (Builder.WithStats
	// with this config, unless Server.Stats is set): /stats/summary and the
	// /metrics/resource collector. Nil serves neither (404), as before.
	Stats *stats.Config
}

// Wire makes b's agent serve the kubelet's HTTPS API (package server) as
// one of its parts and returns b. From the built Agent it takes the pods
// (/pods and the look-ups of logs and streams), the runtime engine's
// running pods, the runtime's Exec, Attach, PortForward and ExecSync when
// it has them (a CRI endpoint does), container logs when the runtime engine
// serves them, and the sync loop's and PLEG's health. Config errors fail
// Build.
func Wire(b *nodekit.Builder, cfg Config) *nodekit.Builder {
	var provider *stats.Provider // set by Build
	if cfg.Stats != nil && cfg.Server.Stats == nil {
		b.WithStats(*cfg.Stats, &provider)
	}
	return b.WithAgentPart("server", func(a *nodekit.Agent) (func(ctx context.Context) error, error) {
		sc := cfg.Server
		if provider != nil {
			sc.Stats = provider
			if sc.ResourceMetrics == nil {
				// The server collects it under each request's context.
				sc.ResourceMetrics = stats.NewResourceCollector(provider, stats.CollectorConfig{Logger: sc.Logger})
			}
		}
		srv, err := server.New(ServerConfig(a, sc))
		if err != nil {
			return nil, fmt.Errorf("agentserver: %w", err)
		}
		return srv.Run, nil
	})
}

// ServerConfig returns cfg with the fields an Agent gives filled in
// (those already set are kept).
func ServerConfig(a *nodekit.Agent, cfg server.Config) server.Config {
	if cfg.Pods == nil {
		cfg.Pods = a
	}
	if cfg.RuntimePods == nil && a.Runtime() != nil {
		cfg.RuntimePods = a.Runtime()
	}
	if cfg.Streaming == nil {
		if s, ok := a.CRI().(server.StreamingRuntime); ok {
			cfg.Streaming = s
		}
	}
	if cfg.Runner == nil {
		if r, ok := a.CRI().(server.CommandRunner); ok {
			cfg.Runner = r
		}
	}
	if cfg.Logs == nil {
		if l, ok := any(a.Runtime()).(server.ContainerLogs); ok {
			cfg.Logs = l
		}
	}
	if cfg.SyncLoopHealthy == nil && a.Loop() != nil {
		cfg.SyncLoopHealthy = a.Loop().SyncLoopHealthy
	}
	if cfg.PLEGHealthy == nil {
		if e := a.EventedPLEG(); e != nil {
			cfg.PLEGHealthy = e.Healthy
		} else if g := a.PLEG(); g != nil {
			cfg.PLEGHealthy = g.Healthy
		}
	}
	return cfg
}
