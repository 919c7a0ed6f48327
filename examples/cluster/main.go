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

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/exserver"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
	"github.com/nodekit/nodekit/examples/internal/exutil"
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
	// shutdown: the graceful node shutdown flags; logind: also take
	// logind's delay inhibitor lock (with a grace period).
	shutdown exshutdown.Flags
	logind   bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with one cluster (server, certificate-authority) and one token user")
	flag.StringVar(&o.server, "server", "", "API server URL (instead of --kubeconfig)")
	flag.StringVar(&o.token, "token", "", "bearer token (with --server)")
	flag.StringVar(&o.ca, "ca", "", "CA certificate file of the API server (with --server)")
	flag.StringVar(&o.nodeName, "node-name", "", "node name (required)")
	flag.StringVar(&o.nodeIPs, "node-ip", "", "IP address of the node, or two comma-separated (one per IP family) for dual-stack: reported as the node's InternalIP(s) and used as every pod's host IP; default: the host's first usable address; 0.0.0.0 or :: only choose the family")
	flag.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI endpoint (unix:///path); empty: the in-memory fake runtime")
	flag.StringVar(&o.images, "fake-images", "busybox", "comma-separated images the fake runtime has")
	flag.StringVar(&o.manifests, "manifests", "", "directory of static pod manifests (optional)")
	flag.StringVar(&o.root, "root", "", "state directory; default: a new temporary directory, removed at exit")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long; 0 runs until Ctrl-C or SIGTERM")
	flag.BoolVar(&o.verbose, "v", false, "log what the agent does (info level)")
	flag.BoolVar(&o.devicePlugins, "device-plugins", false, "serve device plugins on <root>/device-plugins/kubelet.sock (and <root>/plugins_registry); their resources join the node's capacity")
	o.api.Register(flag.CommandLine)
	o.shutdown.Register(flag.CommandLine)
	flag.BoolVar(&o.logind, "shutdown-logind", true, "with --shutdown-grace-period: also hold a logind delay inhibitor lock over D-Bus and shut the node down gracefully when logind announces a shutdown, as the kubelet does (raising logind's InhibitDelayMaxSec with a drop-in when it is too small); without a system bus this is logged once and retried quietly")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), o.shutdown.StopSignals()...)
	defer stop()
	if err := mainErr(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, o options) error {
	cfg, err := restConfig(o)
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
	b := nodekit.NewBuilder().WithRootDir(root).WithLogger(log)
	if o.manifests != "" {
		b.WithManifestDir(o.manifests)
	}
	runtimeName := o.endpoint
	if o.endpoint == "" {
		b.WithFakeRuntime(strings.Split(o.images, ",")...)
		runtimeName = "in-memory fake runtime"
	} else {
		b.WithRuntimeEndpoint(o.endpoint)
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
	port, err := o.api.Wire(b, client, o.nodeName, root, reg, log)
	if err != nil {
		return err
	}
	var watchers []agentshutdown.Watcher
	if o.logind {
		watchers = append(watchers, systemd.Watcher(systemd.Config{Logger: log}))
	}
	sd, err := o.shutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{Logger: log}, Watchers: watchers})
	if err != nil {
		return err
	}
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: o.nodeName, Logger: log,
		NodeIPs: nodeIPs, ServerPort: port, DeclaredFeatures: o.api.DeclaredFeatures()}).Build()
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
