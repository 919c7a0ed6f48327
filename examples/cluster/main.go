// Command cluster is a node agent built with nodekit that joins a
// Kubernetes cluster: it registers the node, keeps its status and lease up
// to date, runs the pods the API server binds to it (and the static pods of
// an optional manifest directory, mirrored in the API server) and reports
// their status back. A small pod table shows what it runs.
//
// With no --runtime-endpoint the pods run on the in-memory fake runtime:
//
//	go run ./examples/cluster --kubeconfig node.kubeconfig --node-name node-1
//	go run ./examples/cluster --server https://127.0.0.1:6443 --token $TOKEN --ca ca.crt --node-name node-1 \
//	    --runtime-endpoint unix:///run/containerd/containerd.sock
//
// The credential should be the node's own (user system:node:<name>, group
// system:nodes).
//
// It serves the kubelet's HTTPS API on --port (10250; kubectl logs, exec,
// attach, port-forward and the API server's node proxy reach it there)
// with the kubelet's flags: --client-ca-file (the API server's kubelet
// client certificate), --authentication-token-webhook, --authorization-mode
// (Webhook), --anonymous-auth, --tls-cert-file/--tls-private-key-file
// (default a self-signed pair kept in <root>/pki), and /healthz on
// 127.0.0.1:--healthz-port (10248). The API server reaches it at the node's
// address: --node-ip.
//
// TLS bootstrap and rotation as the kubelet's flags do them:
// --bootstrap-kubeconfig (a bootstrap token) asks for the node's client
// certificate with a CSR when --kubeconfig holds no valid one, waits until
// it is issued and writes --kubeconfig (default <cert-dir>/kubelet.kubeconfig);
// --rotate-certificates renews it; --rotate-server-certificates gets the
// HTTPS API's certificate through kubelet-serving CSRs; --cert-dir
// (default <root>/pki) keeps the pairs:
//
//	go run ./examples/cluster --bootstrap-kubeconfig bootstrap.kubeconfig --cert-dir /var/lib/nodekit/pki \
//	    --rotate-certificates --rotate-server-certificates --node-name node-1 --root /var/lib/nodekit
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/clusterapiserver/certificate"
	"github.com/nodekit/nodekit/containermgr/devicemanager"
	evapiserver "github.com/nodekit/nodekit/events/apiserver"
	"github.com/nodekit/nodekit/examples/internal/excerts"
	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/exserver"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
	"github.com/nodekit/nodekit/examples/internal/exutil"
	"github.com/nodekit/nodekit/kubeletconfig"
	"github.com/nodekit/nodekit/kubeletconfig/managers"
	"github.com/nodekit/nodekit/nodeshutdown"
	"github.com/nodekit/nodekit/nodeshutdown/systemd"
)

type options struct {
	kubeconfig string
	server     string
	token      string
	ca         string
	nodeName   string
	endpoint   string
	manifests  string
	root       string
	duration   time.Duration
	verbose    bool
	images     string
	nodeIPs    string
	// devicePlugins serves device plugins on <root>/device-plugins.
	devicePlugins bool
	api           exserver.Flags
	// config is --config; given the flags given on the command line; file
	// the loaded configuration (loadConfig).
	config string
	given  exconfig.Given
	file   *kubeletconfig.File
	// manageCgroups: with --config, the cgroup, resource manager and
	// eviction fields are honoured (kubeletconfig/managers).
	manageCgroups bool
	// shutdown: the graceful node shutdown flags; logind: also take
	// logind's delay inhibitor lock (with a grace period).
	shutdown exshutdown.Flags
	logind   bool
	// shutdownByPriority: the file's shutdownGracePeriodByPodPriority.
	shutdownByPriority []nodeshutdown.PriorityGracePeriod
	// certs: the certificate flags; certClient renews the client
	// certificate (--rotate-certificates).
	certs      excerts.Flags
	certClient *certificate.Client
}

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		os.Exit(2) // the flag package printed the error and the usage
	}
	ctx, stop := signal.NotifyContext(context.Background(), o.shutdown.StopSignals()...)
	defer stop()
	if err := mainErr(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// parseFlags defines the flags on fs and parses args.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with one cluster (server, certificate-authority) and one token user")
	fs.StringVar(&o.server, "server", "", "API server URL (instead of --kubeconfig)")
	fs.StringVar(&o.token, "token", "", "bearer token (with --server)")
	fs.StringVar(&o.ca, "ca", "", "CA certificate file of the API server (with --server)")
	fs.StringVar(&o.nodeName, "node-name", "", "node name (required)")
	fs.StringVar(&o.nodeIPs, "node-ip", "", "IP address of the node, or two comma-separated (one per IP family) for dual-stack: reported as the node's InternalIP(s) and used as every pod's host IP; default: the host's first usable address; 0.0.0.0 or :: only choose the family")
	fs.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI endpoint (unix:///path); empty: the in-memory fake runtime")
	fs.StringVar(&o.images, "fake-images", "busybox", "comma-separated images the fake runtime has")
	fs.StringVar(&o.manifests, "manifests", "", "directory of static pod manifests (optional)")
	fs.StringVar(&o.root, "root", "", "state directory; default: a new temporary directory, removed at exit")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long; 0 runs until Ctrl-C or SIGTERM")
	fs.BoolVar(&o.verbose, "v", false, "log what the agent does (info level)")
	fs.BoolVar(&o.devicePlugins, "device-plugins", false, "serve device plugins on <root>/device-plugins/kubelet.sock (and <root>/plugins_registry); their resources join the node's capacity")
	fs.BoolVar(&o.manageCgroups, "manage-cgroups", false, "with --config: run pods in cgroups with the file's cgroup driver, reservations, CPU and memory manager policies and eviction thresholds (needs root; otherwise those fields are only accepted at their defaults)")
	fs.StringVar(&o.config, "config", "", "kubelet configuration file (kubelet.config.k8s.io/v1beta1 KubeletConfiguration, YAML or JSON); the flags given override it")
	o.api.Register(fs)
	o.shutdown.Register(fs)
	o.certs.Register(fs)
	fs.BoolVar(&o.logind, "shutdown-logind", true, "with --shutdown-grace-period: also hold a logind delay inhibitor lock over D-Bus and shut the node down gracefully when logind announces a shutdown, as the kubelet does (raising logind's InhibitDelayMaxSec with a drop-in when it is too small); without a system bus this is logged once and retried quietly")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.given = exconfig.GivenFlags(fs)
	return o, nil
}

func mainErr(ctx context.Context, o options, out io.Writer) error {
	if err := o.loadConfig(); err != nil {
		return err
	}
	var cfg *rest.Config
	var err error
	if o.certs.Enabled() {
		// The kubelet's TLS bootstrap: --kubeconfig is the node's own,
		// written from --bootstrap-kubeconfig when it holds no valid client
		// certificate.
		if err := o.certs.Check(o.nodeName, o.server != "" || o.token != ""); err != nil {
			return err
		}
		cfg, o.certClient, err = o.certs.Client(ctx, o.kubeconfig, o.nodeName, o.root, exlog.New(o.verbose))
		if err == nil {
			defer o.certClient.CloseConnections()
		}
	} else {
		cfg, err = restConfig(o)
	}
	if err != nil {
		return err
	}
	if o.file != nil {
		c := o.file.Config
		cfg.QPS, cfg.Burst, cfg.ContentType = float32(*c.KubeAPIQPS), int(c.KubeAPIBurst), c.ContentType
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return run(ctx, o, client, out)
}

// restConfig builds the client configuration from --kubeconfig or from
// --server, --token and --ca (exutil.RestConfig).
func restConfig(o options) (*rest.Config, error) {
	return exutil.RestConfig(o.kubeconfig, o.server, o.token, o.ca)
}

func run(ctx context.Context, o options, client kubernetes.Interface, out io.Writer) error {
	if o.nodeName == "" {
		return errors.New("--node-name is required")
	}
	log := exlog.New(o.verbose)
	defer log.Sync() //nolint:errcheck // best effort on exit

	if o.root == "" {
		dir, err := os.MkdirTemp("", "nodekit-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.root = dir
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	if err := o.loadConfig(); err != nil {
		return err
	}
	b := nodekit.NewBuilder().WithRootDir(root).WithLogger(log).
		WithIdleMemoryRelease(true) // the process runs one agent
	runtimeName := o.endpoint
	if o.endpoint == "" {
		b.WithFakeRuntime(strings.Split(o.images, ",")...)
		runtimeName = "in-memory fake runtime"
	} else if o.file == nil {
		b.WithRuntimeEndpoint(o.endpoint)
	}
	clusterCfg := clusterapiserver.Config{Client: client, NodeName: o.nodeName, Logger: log}
	if o.file == nil {
		if o.manifests != "" {
			b.WithManifestDir(o.manifests)
		}
	} else {
		parts := []kubeletconfig.Part{
			{Name: "server", Fields: kubeletconfig.FieldsOf(exserver.ConfigFields)},
			{Name: "cluster", Fields: kubeletconfig.FieldsOf(clusterFields), Apply: func(_ *nodekit.Builder, c *kubeletconfigv1beta1.KubeletConfiguration) error {
				return clusterFromConfig(&clusterCfg, c)
			}},
		}
		// The graceful node shutdown fields are read by loadConfig (the
		// flags given override them) and wired below (exshutdown), as are
		// the certificate fields (excerts, in mainErr).
		parts = append(parts, kubeletconfig.Part{Name: "shutdown", Fields: kubeletconfig.FieldsOf(kubeletconfig.ShutdownFields)})
		// rotateCertificates and serverTLSBootstrap: read by loadConfig
		// into the certificate flags (excerts).
		parts = append(parts, kubeletconfig.Part{Name: "certificates", Fields: kubeletconfig.FieldsOf(kubeletconfig.CertificateFields)})
		var validate kubeletconfig.ValidateOptions
		if o.manageCgroups {
			built := &managers.Built{}
			parts = append(parts, managers.Part(managers.Options{StateDir: root, Built: built, Logger: log}))
			clusterCfg.Reservation = built.Reservation
			// The kubelet's failCgroupV1 and singleProcessOOMKill checks
			// apply to an agent that manages cgroups.
			validate.CgroupV1 = !cgroups.IsCgroup2UnifiedMode()
		}
		applied, err := kubeletconfig.Apply(b, o.file.Config, kubeletconfig.Options{
			Runtime: o.endpoint != "", Logger: log, Validate: validate, Parts: parts,
		})
		if err != nil {
			return fmt.Errorf("--config %s: %w", o.file.Path, err)
		}
		o.api.Configz = applied.Configz
	}
	nodeIPs, err := parseNodeIPs(o.nodeIPs)
	if err != nil {
		return err
	}
	if o.devicePlugins {
		dm, err := devicemanager.New(devicemanager.Config{
			PluginDir:   filepath.Join(root, devicemanager.PluginDirName),
			RegistryDir: filepath.Join(root, devicemanager.RegistryDirName),
			Logger:      log,
		})
		if err != nil {
			return err
		}
		b.WithDeviceManager(dm)
	}
	reg := prometheus.NewRegistry()
	b.WithRegisterer(reg)
	if o.certClient != nil && o.certs.Rotate {
		b.WithPart("client certificate", o.certClient.Run)
	}
	if o.api.GetCertificate, err = o.certs.Serving(b, client, o.nodeName, root, nodeIPs, log); err != nil {
		return err
	}
	port, err := o.api.Wire(b, client, o.nodeName, root, reg, log)
	if err != nil {
		return err
	}
	var watchers []agentshutdown.Watcher
	if o.logind {
		watchers = append(watchers, systemd.Watcher(systemd.Config{Logger: log}))
	}
	sd, err := o.shutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{Logger: log, Registerer: reg, GracePeriodByPodPriority: o.shutdownByPriority}, Watchers: watchers})
	if err != nil {
		return err
	}
	clusterCfg.NodeIPs, clusterCfg.ServerPort, clusterCfg.DeclaredFeatures = nodeIPs, port, o.api.DeclaredFeatures()
	agent, err := clusterapiserver.Wire(b, clusterCfg).Build()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "nodekit cluster agent: node %s, runtime %s, root %s\n\n", o.nodeName, runtimeName, root)
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
		exutil.Show(showCtx, agent, out)
	}()
	// With --shutdown-on-sigterm a SIGTERM shuts the node down gracefully,
	// then stops the agent.
	err = o.shutdown.Run(ctx, sd, log, func(ctx context.Context) error {
		defer stopShow()
		return agent.Run(ctx)
	})
	<-shown
	return err
}

// loadConfig reads --config (once) and makes the flags and the file agree:
// a flag given on the command line wins, otherwise the file's value is
// used (exconfig.Given).
func (o *options) loadConfig() error {
	if o.config == "" || o.file != nil {
		return nil
	}
	f, err := kubeletconfig.LoadFile(o.config)
	if err != nil {
		return err
	}
	c := f.Config
	o.given.String("manifests", &o.manifests, &c.StaticPodPath)
	// Without a runtime in the file or on the command line, the fake.
	if f.Given["containerRuntimeEndpoint"] || o.given["runtime-endpoint"] {
		o.given.String("runtime-endpoint", &o.endpoint, &c.ContainerRuntimeEndpoint)
	}
	o.api.FromConfig(c, o.given)
	o.given.Duration("shutdown-grace-period", &o.shutdown.GracePeriod, &c.ShutdownGracePeriod)
	o.given.Duration("shutdown-grace-period-critical-pods", &o.shutdown.GracePeriodCriticalPods, &c.ShutdownGracePeriodCriticalPods)
	// rotateCertificates and serverTLSBootstrap are the certificate flags
	// (excerts), the flags given winning.
	if o.given["rotate-certificates"] {
		c.RotateCertificates = o.certs.Rotate
	} else {
		o.certs.Rotate = c.RotateCertificates
	}
	if o.given["rotate-server-certificates"] {
		c.ServerTLSBootstrap = o.certs.RotateServer
	} else {
		o.certs.RotateServer = c.ServerTLSBootstrap
	}
	for _, g := range c.ShutdownGracePeriodByPodPriority {
		o.shutdownByPriority = append(o.shutdownByPriority, nodeshutdown.PriorityGracePeriod{Priority: g.Priority, ShutdownGracePeriodSeconds: g.ShutdownGracePeriodSeconds})
	}
	o.file = f
	return nil
}

// clusterFields are the configuration fields clusterFromConfig maps.
const clusterFields = "nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds maxPods podsPerCore " +
	"registerNode registerWithTaints eventRecordQPS eventBurst kubeAPIQPS kubeAPIBurst contentType"

// clusterFromConfig sets the cluster wiring from a configuration: node
// status and lease periods, the pods capacity, the taints to register
// with, the event rate (kubeAPIQPS, kubeAPIBurst and contentType go to the
// client in mainErr).
func clusterFromConfig(cfg *clusterapiserver.Config, c *kubeletconfigv1beta1.KubeletConfiguration) error {
	if c.RegisterNode != nil && !*c.RegisterNode {
		return fmt.Errorf("%w: registerNode: false: the agent always registers its node", kubeletconfig.ErrCannotHonour)
	}
	cfg.StatusUpdateFrequency = c.NodeStatusUpdateFrequency.Duration
	cfg.StatusReportFrequency = c.NodeStatusReportFrequency.Duration
	cfg.LeaseDurationSeconds = c.NodeLeaseDurationSeconds
	cfg.MaxPods, cfg.PodsPerCore = int(c.MaxPods), int(c.PodsPerCore)
	cfg.Taints = append(cfg.Taints, c.RegisterWithTaints...)
	qps := float64(*c.EventRecordQPS)
	if qps == 0 {
		qps = 1e9 // the kubelet's 0: no limit
	}
	cfg.Events = evapiserver.Config{QPS: qps, Burst: int(c.EventBurst)}
	return nil
}

// parseNodeIPs reads --node-ip: at most two comma-separated addresses.
func parseNodeIPs(s string) ([]net.IP, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("--node-ip %q: at most two addresses (one per IP family)", s)
	}
	var ips []net.IP
	for _, p := range parts {
		ip := net.ParseIP(strings.TrimSpace(p))
		if ip == nil {
			return nil, fmt.Errorf("--node-ip %q: %q is not an IP address", s, p)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 2 && (ips[0].To4() != nil) == (ips[1].To4() != nil) {
		return nil, fmt.Errorf("--node-ip %q: two addresses of the same IP family", s)
	}
	return ips, nil
}
