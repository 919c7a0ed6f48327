package nodekit

import (
	"context"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
)

// ClusterPart is a component of cluster mode run by the Agent (node status,
// lease, mirror pods): Run must return when its ctx ends.
type ClusterPart struct {
	Name string
	Run  func(ctx context.Context) error
}

// Cluster gathers the pieces that join an Agent to a Kubernetes API
// server. The root package does not talk to an API server itself: package
// clusterapiserver builds a Cluster from a client-go client
// (clusterapiserver.Wire), and tests can build one from fakes.
type Cluster struct {
	// PodSource lists and watches the pods bound to the node; it is added
	// as the pod source "api" (podconfig.SourceAPI). Required.
	PodSource PodSourceFunc
	// StatusSink receives the pod statuses unless WithStatusSink gave a
	// sink before WithCluster. Nil keeps the default.
	StatusSink podstatus.Sink
	// Parts builds, from the built Agent, the components that run with it.
	// It is called by Build once everything else built; an error fails
	// Build. Nil means none.
	Parts func(a *Agent) ([]ClusterPart, error)
}

// WithCluster joins the agent to a cluster: the API server becomes a pod
// source (named "api"), its status sink (unless one was set before) and
// the parts of c run with the agent, after the PLEG and before the sync
// loop, stopped in reverse order.
func (b *Builder) WithCluster(c Cluster) *Builder {
	if c.PodSource == nil {
		b.afterBuild = append(b.afterBuild, func(*Agent) error {
			return configErr("cluster", "WithCluster: PodSource is required")
		})
		return b
	}
	b.WithPodSource(kubetypes.SourceAPI, c.PodSource)
	if b.sink == nil && c.StatusSink != nil {
		b.sink = c.StatusSink
	}
	if c.Parts != nil {
		b.afterBuild = append(b.afterBuild, func(a *Agent) error {
			parts, err := c.Parts(a)
			if err != nil {
				return partErr("cluster", err)
			}
			for _, p := range parts {
				if p.Name == "" || p.Run == nil {
					return configErr("cluster", "a cluster part needs a name and a run func")
				}
				a.parts = append(a.parts, extraPart{name: p.Name, run: p.Run})
			}
			return nil
		})
	}
	return b
}
