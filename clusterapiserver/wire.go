package clusterapiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	evapiserver "github.com/nodekit/nodekit/events/apiserver"
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
	// means the host's. They are the Node's InternalIPs, which every pod
	// gets as its host IPs (unless the Builder has WithNodeIPs).
	NodeIPs []net.IP
	// AllowLoopbackNodeIP accepts 127.0.0.1 or ::1 in NodeIPs (the kubelet
	// refuses them): for an API server on the same host that must reach the
	// agent's HTTPS API, as in the e2e tests.
	AllowLoopbackNodeIP bool
	// Machine describes the host; nil = nodestatus.MachineReader{}.Read.
	Machine nodestatus.MachineFunc
	// AgentVersion is reported as the kubelet version (default
	// nodestatus.DefaultAgentVersion, "v1.36.3+nodekit"). It must be a
	// semantic version (as k8s.io/apimachinery's version.ParseSemantic
	// reads it): controllers and tools parse the kubelet version.
	AgentVersion string
	// StatusUpdateFrequency is how often the node status is computed
	// (nodestatus default 10s); MirrorPeriod how often the mirror pods are
	// synced (10s).
	StatusUpdateFrequency time.Duration
	MirrorPeriod          time.Duration
	// StatusReportFrequency is how often an unchanged node status is
	// still reported (the kubelet's nodeStatusReportFrequency; nodestatus
	// default 5m). LeaseDurationSeconds is the node lease's duration (the
	// kubelet's nodeLeaseDurationSeconds; default 40, renewed every
	// quarter of it).
	StatusReportFrequency time.Duration
	LeaseDurationSeconds  int32
	// LeaseRenewInterval is how often the lease is renewed (0 = a quarter
	// of its duration, 10s): a node simulator scales it to the load it
	// may put on the API server.
	LeaseRenewInterval time.Duration
	// MaxPods and PodsPerCore give the node's pods capacity (the kubelet's
	// maxPods, default 110, and podsPerCore: at most that many pods per
	// core when positive).
	MaxPods     int
	PodsPerCore int
	// Reservation, when set, is what the node holds back from its
	// capacity (system- and kube-reserved and the hard eviction
	// thresholds): the Node's allocatable is capacity minus it, as the
	// kubelet reports it. kubeletconfig/managers' Built.Reservation gives
	// the container manager's. Nil: allocatable is the capacity.
	Reservation func() v1.ResourceList
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
	// ServerPort is the port of the agent's HTTPS API (agentserver.Wire),
	// advertised in the Node's status.daemonEndpoints.kubeletEndpoint.port
	// for the API server to reach logs, exec and port-forward; 0 = none.
	ServerPort int32
	// DeclaredFeatures are reported in the Node's status.declaredFeatures
	// (the kubelet 1.36 declares its feature gates there). Declaring
	// "ExtendWebSocketsToKubelet" makes the API server pass exec, attach
	// and port-forward WebSockets through to the agent unchanged instead of
	// translating them to SPDY: only with server.Config.WebSocketStreams set.
	DeclaredFeatures []string
	// NoLease turns the node lease off.
	NoLease bool
	// NoMirrorPods turns the mirror pods off, for an agent without static
	// pods: the mirror sync lists the node's pods every MirrorPeriod, a
	// load a simulator of many nodes may not want.
	NoMirrorPods bool
	// NoEvents turns off writing the agent's events to the API server
	// (events/apiserver, on by default). Events tunes that recorder
	// (NodeName and Logger are Wire's; Events.Client, when set, writes
	// the events instead of Client, e.g. a client whose rate limit many
	// simulated nodes share).
	NoEvents bool
	Events   evapiserver.Config
	// Registerer, if set, gets the event recorder's metrics
	// (nodekit_events_dropped_total{reason}, nodekit_events_sent_total).
	Registerer prometheus.Registerer
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
		cfg.AgentVersion = nodestatus.DefaultAgentVersion
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
	default:
		cfgErr = checkAgentVersion(cfg.AgentVersion)
	}
	var sink *psapiserver.PodStatusSink
	if cfgErr == nil {
		sink, cfgErr = psapiserver.NewPodStatusSink(psapiserver.PodStatusSinkConfig{Client: cfg.Client, Logger: cfg.Logger})
	}
	var events *evapiserver.Recorder
	if cfgErr == nil && !cfg.NoEvents {
		ecfg := cfg.Events
		ecfg.NodeName, ecfg.Logger = cfg.NodeName, cfg.Logger
		if ecfg.Client == nil {
			ecfg.Client = cfg.Client
		}
		if ecfg.Registerer == nil {
			ecfg.Registerer = cfg.Registerer
		}
		events, cfgErr = evapiserver.New(ecfg)
		if cfgErr == nil {
			b.WithEventRecorder(events)
		}
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
	ips := &nodeIPs{addresses: nodestatus.AddressConfig{NodeIPs: cfg.NodeIPs}, nodeName: cfg.NodeName}
	cluster := nodekit.Cluster{
		PodSource: podSource,
		NodeIPs:   ips.get,
		Parts: func(a *nodekit.Agent) ([]nodekit.ClusterPart, error) {
			if cfgErr != nil {
				return nil, cfgErr
			}
			ps, err := parts(a, cfg, ips)
			if err == nil && events != nil {
				// First, so that it is stopped last.
				ps = append([]nodekit.ClusterPart{{Name: "events", Run: events.Run}}, ps...)
			}
			return ps, err
		},
	}
	if sink != nil {
		cluster.StatusSink = sink
	}
	return b.WithCluster(cluster)
}

// checkAgentVersion refuses a kubelet version that is not a semantic
// version.
func checkAgentVersion(v string) error {
	if _, err := version.ParseSemantic(v); err != nil || strings.TrimSpace(v) != v {
		return fmt.Errorf("%w: AgentVersion %q is not a semantic version (e.g. %q)", ErrInvalidConfig, v, nodestatus.DefaultAgentVersion)
	}
	return nil
}

// nodeIPs gives the pods' host IPs: those of the Node as last stored (as
// the kubelet reads its Node); before the first status report, the
// addresses the node status will report, worked out once the same way.
// The first node reported is the registration's, which may be the Node as
// a previous agent left it (another address), before this agent's first
// status update: it is not used.
type nodeIPs struct {
	addresses nodestatus.AddressConfig
	nodeName  string

	registered atomic.Bool
	stored     atomic.Pointer[[]string]
	once       sync.Once
	static     []string
}

func (n *nodeIPs) get() []string {
	if p := n.stored.Load(); p != nil {
		return *p
	}
	n.once.Do(func() {
		if addrs, err := nodestatus.StaticAddresses(n.addresses, n.nodeName); err == nil {
			n.static = nodestatus.HostIPs(addrs)
		}
	})
	return n.static
}

// reported keeps the host IPs of the node as stored, from the second
// report on.
func (n *nodeIPs) reported(node *v1.Node) {
	if !n.registered.Swap(true) {
		return
	}
	ips := nodestatus.HostIPs(node.Status.Addresses)
	if len(ips) == 0 {
		return
	}
	if p := n.stored.Load(); p != nil && slices.Equal(*p, ips) {
		return
	}
	n.stored.Store(&ips)
}

// parts builds node status, lease and mirror pods for the built agent.
func parts(a *nodekit.Agent, cfg Config, ips *nodeIPs) ([]nodekit.ClusterPart, error) {
	nodeSink, err := nsapiserver.NewSink(nsapiserver.SinkConfig{Client: cfg.Client, NodeName: cfg.NodeName, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	checks := []func() error{nodestatus.RuntimeReadyCheck(a.Loop().RuntimeReady)}
	if p := a.PLEG(); p != nil {
		checks = append(checks, nodestatus.PLEGCheck(p.Healthy))
	}
	// The Builder's WithNodeReadyCheck checks (the node shutdown's).
	checks = append(checks, a.NodeReadyChecks()...)
	setters := nodestatus.SettersConfig{
		Address: nodestatus.AddressConfig{NodeIPs: cfg.NodeIPs, AllowLoopback: cfg.AllowLoopbackNodeIP},
		Machine: nodestatus.MachineInfoConfig{Machine: cfg.Machine, MaxPods: cfg.MaxPods, PodsPerCore: cfg.PodsPerCore,
			Reservation: cfg.Reservation},
		AgentVersion: cfg.AgentVersion,
		Port:         cfg.ServerPort,
		ReadyChecks:  checks,
		// As the kubelet with local storage capacity isolation (its
		// default): no Ready node without ephemeral-storage capacity.
		RequireEphemeralStorage: true,
		// MemoryPressure, DiskPressure and PIDPressure from the eviction
		// manager (WithEviction); no pressure without one.
		Pressure: a.Pressure(),
	}
	// The device plugins' extended resources (WithDeviceManager; none
	// without one).
	setters.Machine.Devices = a
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
		Setters:         append(nodestatus.DefaultSetters(setters), declaredFeatures(cfg.DeclaredFeatures)),
		UpdateFrequency: cfg.StatusUpdateFrequency,
		ReportFrequency: cfg.StatusReportFrequency,
		OnReported:      ips.reported,
		UpdateNow:       a.NodeStatusUpdateRequests(),
		Recorder:        a.EventRecorder(),
		Rand:            cfg.Rand,
		Logger:          cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	mirrors, err := psapiserver.NewMirrorClient(psapiserver.MirrorClientConfig{
		Client: cfg.Client, NodeName: cfg.NodeName, Period: cfg.MirrorPeriod, Logger: cfg.Logger,
		// The sources' merged state, and orphans deleted only once every
		// source listed its pods: a restart recreates no mirror.
		StaticPods: a.PodConfig().MergedState, SourcesReady: a.PodConfig().SeenAllSources,
	})
	if err != nil {
		return nil, err
	}
	out := []nodekit.ClusterPart{{Name: "node status", Run: ctrl.Run}}
	if !cfg.NoLease {
		lease, err := nsapiserver.NewLease(nsapiserver.LeaseConfig{Client: cfg.Client, NodeName: cfg.NodeName,
			DurationSeconds: cfg.LeaseDurationSeconds, RenewInterval: cfg.LeaseRenewInterval, Rand: cfg.Rand, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		out = append(out, nodekit.ClusterPart{Name: "node lease", Run: lease.Run})
	}
	if !cfg.NoMirrorPods {
		out = append(out, nodekit.ClusterPart{Name: "mirror pods", Run: func(ctx context.Context) error {
			return mirrors.Run(ctx)
		}})
	}
	return out, nil
}

// declaredFeatures reports features in status.declaredFeatures.
func declaredFeatures(features []string) nodestatus.Setter {
	return func(_ context.Context, node *v1.Node) error {
		node.Status.DeclaredFeatures = append([]string(nil), features...)
		return nil
	}
}
