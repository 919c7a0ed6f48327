package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/server/healthz"
)

// PodLister lists the pods the agent runs or is about to run (the pod
// manager's view; the sync loop's Pods).
type PodLister interface {
	Pods() []*v1.Pod
}

// RuntimePodLister lists the pods the runtime has (kuberuntime.Manager's
// GetPods): /runningpods/ and the container look-ups of exec, attach,
// port-forward and run.
type RuntimePodLister interface {
	GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error)
}

// ContainerLogs writes a container's log (kuberuntime/logs on the runtime
// engine). stdout or stderr may be nil when that stream is not wanted.
type ContainerLogs interface {
	GetContainerLogs(ctx context.Context, pod *v1.Pod, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error
}

// StreamingRuntime is the part of the CRI that prepares streams: each call
// returns the URL of the runtime's streaming server the agent proxies the
// client's upgraded connection to.
type StreamingRuntime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// CommandRunner runs a command in a container and returns its output
// (CRI ExecSync): /run.
type CommandRunner interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// StatsProvider computes the node's stats summary (/stats/summary).
type StatsProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// HealthCheck is one named /healthz check.
type HealthCheck = healthz.Check

// The defaults of Config.
const (
	DefaultPort                  = 10250
	DefaultHealthzPort           = healthz.DefaultPort
	DefaultStreamingIdleTimeout  = 4 * time.Hour
	DefaultStreamCreationTimeout = 30 * time.Second
	DefaultMaxStreams            = 128
	DefaultRequestTimeout        = 2 * time.Minute
)

// Config configures a Server. Only NodeName, Pods and Authorizer are
// required; a route whose source is nil answers 501 Not Implemented
// (404 for the optional metrics and stats routes).
type Config struct {
	// NodeName names the node in authorization checks (required).
	NodeName string
	// Pods are the agent's pods: /pods, and the pods /containerLogs,
	// /exec, /attach, /portForward and /run look up by name (required).
	Pods PodLister
	// RuntimePods, Streaming and Runner serve /runningpods/, the streams
	// and /run.
	RuntimePods RuntimePodLister
	Streaming   StreamingRuntime
	Runner      CommandRunner
	// Logs serves /containerLogs.
	Logs ContainerLogs
	// Stats serves /stats/summary and ResourceMetrics /metrics/resource
	// (404 when nil).
	Stats           StatsProvider
	ResourceMetrics prometheus.Collector
	// Metrics is the agent's registry, served on /metrics; /metrics/probes
	// serves ProbeMetrics, or when nil the prober_probe_* families of
	// Metrics. 404 when nil.
	Metrics      prometheus.Gatherer
	ProbeMetrics prometheus.Gatherer
	// Configz returns the agent's effective configuration, served on
	// /configz as {"kubeletconfig": ...}; 404 when nil.
	Configz func() (any, error)
	// SyncLoopHealthy and PLEGHealthy are the /healthz/syncloop and
	// /healthz/pleg checks (omitted when nil); HealthChecks are added
	// after them.
	SyncLoopHealthy func() error
	PLEGHealthy     func() (bool, error)
	HealthChecks    []HealthCheck

	// Authenticator identifies callers; nil with ClientCA set means
	// X509Authenticator{ClientCA}. A request no authenticator recognises
	// is refused 401, unless Anonymous: then it goes on as
	// system:anonymous and is still authorized.
	Authenticator Authenticator
	ClientCA      *x509.CertPool
	Anonymous     bool
	// Authorizer decides every authenticated request (required; AlwaysAllow
	// only when chosen explicitly).
	Authorizer Authorizer
	// WebSocketStreams, when set, serves exec and attach requests that
	// speak the v5 WebSocket protocol and port-forward requests that tunnel
	// SPDY over WebSocket, translating them to the runtime's SPDY (the
	// kubelet's ExtendWebSocketsToKubelet); server/apiserver provides it.
	// Nil proxies them to the runtime unchanged.
	WebSocketStreams WebSocketStreams

	// Address and Port are where Run serves the API with TLS (default
	// 0.0.0.0 and 10250). HealthzAddress and HealthzPort are the plain-HTTP
	// /healthz listener (default 127.0.0.1; port 0 = off).
	Address        string
	Port           int
	HealthzAddress string
	HealthzPort    int

	// TLSCertFile and TLSKeyFile are the serving pair; without them Run
	// makes a self-signed pair once and keeps it in CertDir (kubelet.crt,
	// kubelet.key), as the kubelet does without --tls-cert-file.
	TLSCertFile string
	TLSKeyFile  string
	CertDir     string
	// GetCertificate, when set, gives the serving certificate of every TLS
	// handshake instead (tls.Config.GetCertificate): a renewed certificate
	// is served from the next connection on, e.g. one issued through
	// kubernetes.io/kubelet-serving CSRs (clusterapiserver/certificate's
	// Serving.GetCertificate). TLSCertFile and CertDir are then unused.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// CertIPs are added to the self-signed certificate's addresses
	// (besides the node name, localhost, 127.0.0.1 and ::1).
	CertIPs []net.IP
	// StreamingIdleTimeout closes a stream with no traffic either way
	// (default 4h); StreamCreationTimeout bounds preparing a stream and
	// reaching the runtime (default 30s); MaxStreams caps the streams open
	// at once (default 128; more are refused 429). RequestTimeout bounds
	// the non-streaming routes (default 2m).
	StreamingIdleTimeout  time.Duration
	StreamCreationTimeout time.Duration
	MaxStreams            int
	RequestTimeout        time.Duration

	Clock  clock.WithTicker
	Logger *zap.Logger
}

func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case c.Pods == nil:
		return fmt.Errorf("%w: Pods is required", ErrInvalidConfig)
	case c.Authorizer == nil:
		return fmt.Errorf("%w: Authorizer is required (AlwaysAllow only if chosen)", ErrInvalidConfig)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("%w: Port %d out of range", ErrInvalidConfig, c.Port)
	case c.HealthzPort < 0 || c.HealthzPort > 65535:
		return fmt.Errorf("%w: HealthzPort %d out of range", ErrInvalidConfig, c.HealthzPort)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("%w: TLSCertFile and TLSKeyFile go together", ErrInvalidConfig)
	case c.GetCertificate != nil && c.TLSCertFile != "":
		return fmt.Errorf("%w: GetCertificate and TLSCertFile exclude each other", ErrInvalidConfig)
	case c.TLSCertFile == "" && c.CertDir == "" && c.GetCertificate == nil:
		return fmt.Errorf("%w: CertDir is required without TLSCertFile", ErrInvalidConfig)
	case c.StreamingIdleTimeout < 0 || c.StreamCreationTimeout < 0 || c.RequestTimeout < 0 || c.MaxStreams < 0:
		return fmt.Errorf("%w: negative timeout or MaxStreams", ErrInvalidConfig)
	}
	for _, h := range c.HealthChecks {
		if h.Name == "" || h.Check == nil {
			return fmt.Errorf("%w: HealthChecks: a check needs a name and a func", ErrInvalidConfig)
		}
	}
	return nil
}

func (c *Config) defaults() {
	if c.Address == "" {
		c.Address = "0.0.0.0"
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.HealthzAddress == "" {
		c.HealthzAddress = "127.0.0.1"
	}
	if c.StreamingIdleTimeout == 0 {
		c.StreamingIdleTimeout = DefaultStreamingIdleTimeout
	}
	if c.StreamCreationTimeout == 0 {
		c.StreamCreationTimeout = DefaultStreamCreationTimeout
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.Named("server")
	if c.Authenticator == nil && c.ClientCA != nil {
		c.Authenticator = X509Authenticator{Roots: c.ClientCA}
	}
}
