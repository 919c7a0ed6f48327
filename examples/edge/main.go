package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/clusterapiserver/certificate"
	"github.com/nodekit/nodekit/examples/internal/excerts"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/exserver"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
	"github.com/nodekit/nodekit/examples/internal/exutil"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/nodeshutdown"
	"github.com/nodekit/nodekit/nodeshutdown/systemd"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podconfig/checkpoint"
	"github.com/nodekit/nodekit/volumemgr"
	vmapiserver "github.com/nodekit/nodekit/volumemgr/apiserver"
)

// The layout of --state-dir (see the package documentation).
const (
	checkpointsDir = "checkpoints"
	objectsDir     = "objects"
)

type options struct {
	kubeconfig  string
	server      string
	token       string
	ca          string
	nodeName    string
	endpoint    string
	images      string
	stateDir    string
	replayAfter time.Duration
	statusEvery time.Duration
	duration    time.Duration
	verbose     bool
	quiet       bool
	nodeIPs     string
	api         exserver.Flags
	// shutdown: the graceful node shutdown flags; logind: also take
	// logind's delay inhibitor lock (with a grace period).
	shutdown exshutdown.Flags
	logind   bool
	certs    excerts.Flags
	// certClient renews the client certificate (--rotate-certificates).
	certClient *certificate.Client
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with one cluster (server, certificate-authority) and one token user")
	flag.StringVar(&o.server, "server", "", "API server URL (instead of --kubeconfig)")
	flag.StringVar(&o.token, "token", "", "bearer token (with --server)")
	flag.StringVar(&o.ca, "ca", "", "CA certificate file of the API server (with --server)")
	flag.StringVar(&o.nodeName, "node-name", "", "node name (required)")
	flag.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI endpoint (unix:///path); empty: the in-memory fake runtime")
	flag.StringVar(&o.images, "fake-images", "busybox", "comma-separated images the fake runtime has")
	flag.StringVar(&o.stateDir, "state-dir", "/var/lib/nodekit-edge", "state directory: pods, persisted pod set, configMaps and secrets")
	flag.DurationVar(&o.replayAfter, "replay-after", 2*time.Second, "start the persisted pods when the API server has not answered within this long")
	flag.DurationVar(&o.statusEvery, "status-every", 10*time.Second, "how often the node status is computed (and sent when the API server is there)")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long; 0 runs until Ctrl-C or SIGTERM")
	flag.BoolVar(&o.verbose, "v", false, "log what the agent does (info level)")
	flag.BoolVar(&o.quiet, "q", false, "no pod table")
	flag.StringVar(&o.nodeIPs, "node-ip", "", "comma-separated node addresses (at most one per family; the API server reaches the agent's API there); default: the host's")
	o.api.Register(flag.CommandLine)
	o.shutdown.Register(flag.CommandLine)
	flag.BoolVar(&o.logind, "shutdown-logind", true, "with --shutdown-grace-period: also hold a logind delay inhibitor lock over D-Bus and shut the node down gracefully when logind announces a shutdown, as the kubelet does; without a system bus this is logged once and retried quietly")
	o.certs.Register(flag.CommandLine)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), o.shutdown.StopSignals()...)
	defer stop()
	if err := mainErr(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, o options) error {
	var cfg *rest.Config
	var err error
	if o.certs.Enabled() {
		// The kubelet's TLS bootstrap (it waits for the API server only
		// when there is no valid client certificate); --cert-dir defaults
		// to <state-dir>/pki.
		if err := o.certs.Check(o.nodeName, o.server != "" || o.token != ""); err != nil {
			return err
		}
		cfg, o.certClient, err = o.certs.Client(ctx, o.kubeconfig, o.nodeName, o.stateDir, exlog.New(o.verbose))
		if err == nil {
			defer o.certClient.CloseConnections()
			cfg.Timeout = 10 * time.Second
			cfg.QPS, cfg.Burst = 20, 40
		}
	} else {
		cfg, err = restConfig(o)
	}
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return run(ctx, o, client, os.Stdout)
}

// restConfig builds the client configuration from --kubeconfig or from
// --server, --token and --ca. Calls time out after 10s so a partitioned
// link does not hold up the agent, and the client-side rate limit is
// raised so the catch-up after an outage is quick.
func restConfig(o options) (*rest.Config, error) {
	cfg, err := exutil.RestConfig(o.kubeconfig, o.server, o.token, o.ca)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	cfg.QPS, cfg.Burst = 20, 40
	return cfg, nil
}

// persistedSource is the API server pod source behind the persisted
// source: the API server's pod sets go through persist (to disk, then to
// PodConfig), and persist replays the last set when the API server does
// not answer within --replay-after.
type persistedSource struct {
	persist *checkpoint.Source
	api     nodekit.PodSource
}

// Run runs both until ctx ends. If one returns before that, it stops the
// other and returns an error naming the first (the lifecycle contract's
// fail-fast rule).
func (s *persistedSource) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 2)
	go func() { results <- result{"persisted pods", s.persist.Run(runCtx)} }()
	go func() { results <- result{"API server pods", s.api.Run(runCtx)} }()
	first := <-results
	stop()
	second := <-results
	if ctx.Err() != nil {
		return nil // a clean stop
	}
	return errors.Join(lifecycle.StoppedEarly(first.name, first.err), second.err)
}

// edge is a built agent and the parts the example looks at.
type edge struct {
	agent    *nodekit.Agent
	objects  *vmapiserver.Persisted
	root     string
	shutdown *agentshutdown.Handle // nil without --shutdown-grace-period
}

// build assembles the agent: clusterapiserver.Wire with the API server pod
// source wrapped in podconfig/checkpoint, and the volume manager and env
// over configMaps and secrets persisted on disk.
func build(o options, client kubernetes.Interface, log *zap.Logger) (*edge, error) {
	if o.nodeName == "" {
		return nil, errors.New("--node-name is required")
	}
	if o.stateDir == "" {
		return nil, errors.New("--state-dir is required")
	}
	root, err := filepath.Abs(o.stateDir)
	if err != nil {
		return nil, err
	}
	e := &edge{root: root}
	b := nodekit.NewBuilder().WithRootDir(root).WithNodeName(o.nodeName).WithLogger(log).
		WithIdleMemoryRelease(true) // the process runs one agent
	var mounter volumemgr.Mounter
	if o.endpoint == "" {
		b.WithFakeRuntime(strings.Split(o.images, ",")...)
	} else {
		b.WithRuntimeEndpoint(o.endpoint)
		mounter = &volumemgr.SystemMounter{}
	}

	// The pod source: API server -> persisted set -> PodConfig.
	wrap := func(api nodekit.PodSourceFunc) nodekit.PodSourceFunc {
		return func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			persist, err := checkpoint.New(checkpoint.Config{
				Dir: filepath.Join(root, checkpointsDir), Source: kubetypes.SourceAPI, Out: out,
				ReplayAfter: o.replayAfter, Logger: log,
			})
			if err != nil {
				return nil, err
			}
			src, err := api(persist.In())
			if err != nil {
				return nil, err
			}
			return &persistedSource{persist: persist, api: src}, nil
		}
	}

	// ConfigMaps and secrets, with their copies on disk; volumes and env.
	var agent *nodekit.Agent
	objs, err := vmapiserver.NewPersisted(vmapiserver.PersistConfig{
		Client: client, Dir: filepath.Join(root, objectsDir), Logger: log,
		Pods: func() []*v1.Pod { return agent.Pods() },
		PodsReady: func() bool {
			return agent.PodConfig().SeenAllSources()
		},
	})
	if err != nil {
		return nil, err
	}
	e.objects = objs
	vm, err := volumemgr.New(volumemgr.Config{
		PodsDir: filepath.Join(root, "pods"),
		Plugins: volumemgr.DefaultPlugins(volumemgr.PluginsConfig{Objects: objs, Tokens: objs, Mounter: mounter}),
		Mounter: mounter,
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}
	b.WithVolumeManager(vm).
		WithRuntimeConfig(func(c *kuberuntime.Config) { c.EnvSources = objs }).
		WithPart("persisted objects", objs.Run)

	// The kubelet's HTTPS API (logs, exec, attach, port-forward), its
	// requests authenticated and authorized by the API server.
	nodeIPs, err := exserver.ParseIPs(o.nodeIPs)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	b.WithRegisterer(reg)
	if o.certClient != nil && o.certs.Rotate {
		b.WithPart("client certificate", o.certClient.Run)
	}
	if o.api.GetCertificate, err = o.certs.Serving(b, client, o.nodeName, root, nodeIPs, log); err != nil {
		return nil, err
	}
	port, err := o.api.Wire(b, client, o.nodeName, root, reg, log)
	if err != nil {
		return nil, err
	}

	// The API server parts: the wrapped pod source, the pod status sink
	// (the latest status of each pod is kept and sent when the API server
	// answers again), node status, lease, mirror pods.
	clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: client, NodeName: o.nodeName, AgentVersion: nodestatus.KubernetesVersion + "+nodekit-edge", Logger: log,
		StatusUpdateFrequency: o.statusEvery,
		// Back soon after an outage: pods bound meanwhile are seen within 5s.
		PodWatchMaxBackoff: 5 * time.Second,
		WrapPodSource:      wrap,
		NodeIPs:            nodeIPs,
		ServerPort:         port,
		DeclaredFeatures:   o.api.DeclaredFeatures(),
	})

	// Graceful node shutdown (--shutdown-*): the group's budget also
	// covers the unmount of the pods' volumes, as in the kubelet.
	var watchers []agentshutdown.Watcher
	if o.logind {
		watchers = append(watchers, systemd.Watcher(systemd.Config{Logger: log}))
	}
	if e.shutdown, err = o.shutdown.Wire(b, agentshutdown.Config{
		Shutdown: nodeshutdown.Config{Logger: log, Registerer: reg, WaitForUnmount: vm.WaitForUnmount}, Watchers: watchers,
	}); err != nil {
		return nil, err
	}

	agent, err = b.Build()
	if err != nil {
		return nil, err
	}
	e.agent = agent
	return e, nil
}

func run(ctx context.Context, o options, client kubernetes.Interface, out io.Writer) error {
	log := exlog.New(o.verbose)
	defer log.Sync() //nolint:errcheck // best effort on exit

	e, err := build(o, client, log)
	if err != nil {
		return err
	}
	runtimeName := o.endpoint
	if runtimeName == "" {
		runtimeName = "in-memory fake runtime"
	}
	fmt.Fprintf(out, "nodekit edge agent: node %s, runtime %s, state %s\n\n", o.nodeName, runtimeName, e.root)
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	showCtx, stopShow := context.WithCancel(ctx)
	defer stopShow()
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		if !o.quiet {
			exutil.Show(showCtx, e.agent, out)
		}
	}()
	// With --shutdown-on-sigterm a SIGTERM shuts the node down gracefully,
	// then stops the agent.
	err = o.shutdown.Run(ctx, e.shutdown, log, func(ctx context.Context) error {
		defer stopShow()
		return e.agent.Run(ctx)
	})
	<-shown
	return err
}
