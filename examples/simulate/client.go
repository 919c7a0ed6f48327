package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// clients gives the simulator its API clients: one shared by the pod and
// node watches, one per node, and the count of requests sent.
type clients interface {
	Shared() kubernetes.Interface
	ForNode() (kubernetes.Interface, error)
	// Events is the client every node writes its events with, or nil
	// for each node's own (ForNode's).
	Events() kubernetes.Interface
	Requests() int64
}

// apiClients are the simulator's clients: one HTTP connection pool (one
// HTTP/2 connection) for every node, an overall rate limit every request
// passes, a per-node limit on top of it, and a count of the requests sent.
type apiClients struct {
	cfg      *rest.Config
	http     *http.Client
	shared   kubernetes.Interface
	global   flowcontrol.RateLimiter
	events   kubernetes.Interface
	nodeQPS  float32
	burst    int
	requests atomic.Int64
}

// newAPIClients makes the clients from base. qps/burst limit all requests
// together and nodeQPS/nodeBurst each node's (0 or less: no limit).
func newAPIClients(base *rest.Config, qps float32, burst int, nodeQPS float32, nodeBurst int) (*apiClients, error) {
	c := &apiClients{nodeQPS: nodeQPS, burst: nodeBurst}
	cfg := rest.CopyConfig(base)
	cfg.UserAgent = "nodekit-simulate"
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return &countingTransport{next: rt, n: &c.requests}
	}
	// Rate limits are the limiters' below, not client-go's default 5 QPS.
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c.cfg, c.http = cfg, hc
	if qps > 0 {
		c.global = flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
	}
	shared := rest.CopyConfig(cfg)
	shared.RateLimiter = c.limiter(nil)
	// The shared client's watches (every node's pods, the Nodes) last
	// minutes: the same connections, without the per-request timeout.
	shared.Timeout = 0
	watchClient := &http.Client{Transport: hc.Transport}
	if c.shared, err = kubernetes.NewForConfigAndClient(shared, watchClient); err != nil {
		return nil, err
	}
	return c, nil
}

// limiter is the overall limit, and node's own before it when not nil.
func (c *apiClients) limiter(node flowcontrol.RateLimiter) flowcontrol.RateLimiter {
	switch {
	case node == nil && c.global == nil:
		return flowcontrol.NewFakeAlwaysRateLimiter()
	case node == nil:
		return c.global
	case c.global == nil:
		return node
	}
	return &bothLimiters{first: node, second: c.global}
}

func (c *apiClients) Shared() kubernetes.Interface { return c.shared }
func (c *apiClients) Events() kubernetes.Interface { return c.events }
func (c *apiClients) Requests() int64              { return c.requests.Load() }

// limitEvents gives the events of all nodes together a rate limit of
// their own (before the overall one), so that events, which the API
// server stores like any write, cannot take the share of its writes the
// pods' status needs. qps <= 0 leaves each node's events to its own client
// (each node's event recorder has the kubelet's limit, 50/s, either way).
func (c *apiClients) limitEvents(qps float32, burst int) error {
	if qps <= 0 {
		c.events = nil
		return nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.RateLimiter = c.limiter(flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1)))
	core, err := corev1.NewForConfigAndClient(cfg, c.http)
	if err != nil {
		return fmt.Errorf("events client: %w", err)
	}
	c.events = &nodeClient{Interface: c.shared, core: core}
	return nil
}

// ForNode is a node's client: its own core client for pods and events
// (the node's rate limit, then the overall one), and, as the kubelet's
// heartbeat client, core and coordination clients without client-side
// limits for its Node and Lease, so a node busy with its pods still
// renews its lease in time; everything else is the shared client's. It
// costs a few KB, not a whole clientset.
func (c *apiClients) ForNode() (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c.cfg)
	var own flowcontrol.RateLimiter
	if c.nodeQPS > 0 {
		own = flowcontrol.NewTokenBucketRateLimiter(c.nodeQPS, max(c.burst, 1))
	}
	cfg.RateLimiter = c.limiter(own)
	core, err := corev1.NewForConfigAndClient(cfg, c.http)
	if err != nil {
		return nil, fmt.Errorf("core client: %w", err)
	}
	hbCfg := rest.CopyConfig(c.cfg)
	hbCfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	hbCore, err := corev1.NewForConfigAndClient(hbCfg, c.http)
	if err != nil {
		return nil, fmt.Errorf("heartbeat core client: %w", err)
	}
	coord, err := coordinationv1.NewForConfigAndClient(hbCfg, c.http)
	if err != nil {
		return nil, fmt.Errorf("coordination client: %w", err)
	}
	return &nodeClient{Interface: c.shared, core: &heartbeatCore{CoreV1Interface: core, nodes: hbCore}, coord: coord}, nil
}

// nodeClient is a node's kubernetes.Interface: what a node agent uses
// (pods, nodes, events, leases) goes through the node's own clients.
type nodeClient struct {
	kubernetes.Interface
	core  corev1.CoreV1Interface
	coord coordinationv1.CoordinationV1Interface
}

func (n *nodeClient) CoreV1() corev1.CoreV1Interface                         { return n.core }
func (n *nodeClient) CoordinationV1() coordinationv1.CoordinationV1Interface { return n.coord }

// heartbeatCore sends Node requests through the heartbeat client.
type heartbeatCore struct {
	corev1.CoreV1Interface
	nodes corev1.CoreV1Interface
}

func (h *heartbeatCore) Nodes() corev1.NodeInterface { return h.nodes.Nodes() }

// bothLimiters takes a token from first, then from second.
type bothLimiters struct{ first, second flowcontrol.RateLimiter }

func (b *bothLimiters) TryAccept() bool {
	// A token taken from first is not given back if second refuses: the
	// per-node limit is then a little stricter than asked, never looser.
	return b.first.TryAccept() && b.second.TryAccept()
}
func (b *bothLimiters) Stop()        { b.first.Stop() }
func (b *bothLimiters) QPS() float32 { return min(b.first.QPS(), b.second.QPS()) }
func (b *bothLimiters) Accept()      { b.first.Accept(); b.second.Accept() }
func (b *bothLimiters) Wait(ctx context.Context) error {
	if err := b.first.Wait(ctx); err != nil {
		return err
	}
	return b.second.Wait(ctx)
}

// countingTransport counts the requests sent.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}
