package nodekit

import (
	"context"

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
	// sink (before or after WithCluster). Nil keeps the default.
	StatusSink podstatus.Sink
	// Parts builds, from the built Agent, the components that run with it.
	// It is called by Build once everything else built; an error fails
	// Build. Nil means none.
	Parts func(a *Agent) ([]ClusterPart, error)
	// NodeIPs, when set, returns the node's IP addresses as the cluster
	// knows them (the primary first, at most one per family; may change
	// over time), read for every pod status and container environment
	// unless WithNodeIPs gave them: pods' status.hostIP(s), host-network
	// pods' pod IPs and the env fieldRefs status.hostIP(s).
	NodeIPs func() []string
}

// WithCluster joins the agent to a cluster: the API server becomes a pod
// source (named "api"), its status sink (unless WithStatusSink gave one) and
// the parts of c run with the agent, after the PLEG and before the sync
// loop, stopped in reverse order.
func (b *Builder) WithCluster(c Cluster) *Builder {
	switch {
	case c.PodSource == nil:
		b.misuse = append(b.misuse, configErr("cluster", "WithCluster: PodSource is required"))
	case len(b.clusters) > 0:
		b.misuse = append(b.misuse, configErr("cluster", "WithCluster given twice"))
	default:
		b.clusters = append(b.clusters, c)
	}
	return b
}

// clusterParts builds the cluster's parts from the built Agent.
func (bd *build) clusterParts() {
	for _, c := range bd.b.clusters {
		if c.Parts == nil {
			continue
		}
		parts, err := c.Parts(bd.a)
		if err != nil {
			bd.fail(partErr("cluster", err))
			continue
		}
		for _, p := range parts {
			if p.Name == "" || p.Run == nil {
				bd.fail(configErr("cluster", "a cluster part needs a name and a run func"))
				continue
			}
			bd.a.parts = append(bd.a.parts, extraPart{name: p.Name, run: p.Run})
		}
	}
}
