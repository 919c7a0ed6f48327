package clusterapiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/nodestatus"
	nsapiserver "github.com/nodekit/nodekit/nodestatus/apiserver"
	pcapiserver "github.com/nodekit/nodekit/podconfig/apiserver"
	psapiserver "github.com/nodekit/nodekit/podstatus/apiserver"
)

// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
var ErrInvalidConfig = errors.New("clusterapiserver: invalid config")

// Config configures Wire.
type Config struct {
	// Client talks to the API server, normally with the node's credential
	// (required).
	Client kubernetes.Interface
	// NodeName is the node's name (required); Wire also sets it on the
	// Builder.
	NodeName string
	// Labels and Taints the node registers with.
	Labels map[string]string
	Taints []v1.Taint
	// NodeIPs are the node's addresses (at most one per family); empty
	// means the host's.
	NodeIPs []net.IP
	// Machine describes the host; nil = nodestatus.MachineReader{}.Read.
	Machine nodestatus.MachineFunc
	// AgentVersion is reported as the kubelet version (default "nodekit").
	AgentVersion string
	// StatusUpdateFrequency is how often the node status is computed
	// (nodestatus default 10s); MirrorPeriod how often the mirror pods are
	// synced (10s).
	StatusUpdateFrequency time.Duration
	MirrorPeriod          time.Duration
	// PodWatchMaxBackoff caps the wait before the API server pod source
	// lists and watches again after a failure, so that pods bound during
	// or after an outage are seen soon after the API server returns. 0 =
	// client-go's default, as the kubelet has it (up to 30s, jittered up
	// to 60s).
	PodWatchMaxBackoff time.Duration
	// WrapPodSource, when set, is given the API server pod source and
	// returns the source the agent runs instead: e.g. one that persists
	// every set to disk and replays it when the API server is unreachable
	// (podconfig/checkpoint; examples/edge does this).
	WrapPodSource func(api nodekit.PodSourceFunc) nodekit.PodSourceFunc
	// NoLease turns the node lease off.
	NoLease bool
	// Rand returns a number in [0,1) for the jitter of the node status
	// updates and the lease renewals (4 % of their periods); nil =
	// math/rand/v2. Pass the Builder's WithRand source for exact tests.
	Rand   func() float64
	Logger *zap.Logger
}

// Wire adds the API server parts to b (see the package documentation) and
// returns b. Config errors are reported by Build.
func Wire(b *nodekit.Builder, cfg Config) *nodekit.Builder {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.AgentVersion == "" {
		cfg.AgentVersion = "nodekit"
	}
	if cfg.Machine == nil {
		cfg.Machine = nodestatus.MachineReader{}.Read
	}
	b.WithNodeName(cfg.NodeName)
	var cfgErr error
	switch {
	case cfg.Client == nil:
		cfgErr = fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	case cfg.NodeName == "":
		cfgErr = fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	}
	var sink *psapiserver.PodStatusSink
	if cfgErr == nil {
		sink, cfgErr = psapiserver.NewPodStatusSink(psapiserver.PodStatusSinkConfig{Client: cfg.Client, Logger: cfg.Logger})
	}
	var podSource nodekit.PodSourceFunc = func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
		if cfgErr != nil {
			return nil, cfgErr
		}
		return pcapiserver.New(pcapiserver.Config{Client: cfg.Client, NodeName: cfg.NodeName, Out: out,
			MaxRetryBackoff: cfg.PodWatchMaxBackoff, Logger: cfg.Logger})
	}
	if cfg.WrapPodSource != nil {
		podSource = cfg.WrapPodSource(podSource)
		if podSource == nil && cfgErr == nil {
			cfgErr = fmt.Errorf("%w: WrapPodSource returned nil", ErrInvalidConfig)
		}
		if podSource == nil {
			podSource = func(chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) { return nil, cfgErr }
		}
	}
	cluster := nodekit.Cluster{
		PodSource: podSource,
		Parts: func(a *nodekit.Agent) ([]nodekit.ClusterPart, error) {
			if cfgErr != nil {
				return nil, cfgErr
			}
			return parts(a, cfg)
		},
	}
	if sink != nil {
		cluster.StatusSink = sink
	}
	return b.WithCluster(cluster)
}

// parts builds node status, lease and mirror pods for the built agent.
func parts(a *nodekit.Agent, cfg Config) ([]nodekit.ClusterPart, error) {
	nodeSink, err := nsapiserver.NewSink(nsapiserver.SinkConfig{Client: cfg.Client, NodeName: cfg.NodeName, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	checks := []func() error{nodestatus.RuntimeReadyCheck(a.Loop().RuntimeReady)}
	if p := a.PLEG(); p != nil {
		checks = append(checks, nodestatus.PLEGCheck(p.Healthy))
	}
	setters := nodestatus.SettersConfig{
		Address:      nodestatus.AddressConfig{NodeIPs: cfg.NodeIPs},
		Machine:      nodestatus.MachineInfoConfig{Machine: cfg.Machine},
		AgentVersion: cfg.AgentVersion,
		ReadyChecks:  checks,
		// As the kubelet with local storage capacity isolation (its
		// default): no Ready node without ephemeral-storage capacity.
		RequireEphemeralStorage: true,
		// MemoryPressure, DiskPressure and PIDPressure from the eviction
		// manager (WithEviction); no pressure without one.
		Pressure: a.Pressure(),
	}
	if v, ok := a.CRI().(nodestatus.RuntimeVersioner); ok {
		setters.Runtime = v
	}
	if l, ok := a.CRI().(nodestatus.ImageLister); ok {
		setters.Images = l
	}
	ctrl, err := nodestatus.New(nodestatus.Config{
		NodeName:        cfg.NodeName,
		Labels:          cfg.Labels,
		Taints:          cfg.Taints,
		Sink:            nodeSink,
		Setters:         nodestatus.DefaultSetters(setters),
		UpdateFrequency: cfg.StatusUpdateFrequency,
		Rand:            cfg.Rand,
		Logger:          cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	mirrors, err := psapiserver.NewMirrorClient(psapiserver.MirrorClientConfig{
		Client: cfg.Client, NodeName: cfg.NodeName, StaticPods: a.Pods, Period: cfg.MirrorPeriod, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	out := []nodekit.ClusterPart{{Name: "node status", Run: ctrl.Run}}
	if !cfg.NoLease {
		lease, err := nsapiserver.NewLease(nsapiserver.LeaseConfig{Client: cfg.Client, NodeName: cfg.NodeName, Rand: cfg.Rand, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		out = append(out, nodekit.ClusterPart{Name: "node lease", Run: lease.Run})
	}
	out = append(out, nodekit.ClusterPart{Name: "mirror pods", Run: func(ctx context.Context) error {
		return mirrors.Run(ctx)
	}})
	return out, nil
}
