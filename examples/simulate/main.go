// Command simulate runs many simulated nodes in one process, each a
// complete nodekit agent on its own in-memory fake runtime, joined to a
// real Kubernetes API server: pod sources, pod workers, status manager,
// PLEG, probes, node status and lease, eviction on the fake's stats. Pods
// bound to them (by the scheduler or spec.nodeName) run as the fake
// runtime's simulated processes say (exit codes, durations, memory use,
// SIGTERM handling from the pod annotation fake.nodekit.io/behavior.<c>;
// network probe answers from simulate.nodekit.io/probe-<port>):
//
//	go run ./examples/simulate --kubeconfig admin.kubeconfig --nodes 200 --name-pattern sim-%04d
//
// The credential must be allowed to list and watch every pod and to write
// Nodes, Leases, pod status and events (an admin's): all nodes share one
// watch of the pods bound to any node, one HTTP/2 connection and the
// overall rate limit --qps/--burst, each node with its own limit
// --node-qps/--node-burst on top.
//
// Capacity, labels and taints come from --cpu, --memory, --pods,
// --ephemeral-storage, --labels and --taints, or per node from
// --node-config (see specFile). The API load is set by --lease-duration,
// --lease-renew, --status-update and --status-report (the kubelet's
// defaults: 40s, 10s, 10s, 5m).
//
// Nodes are stopped (the agent stops, its pods keep running in its fake
// runtime), killed (the machine is gone: the next start is a reboot with
// no pods) and started again through the control API on --control
// (loopback only):
//
//	curl -X POST 127.0.0.1:PORT/nodes/sim-000[0-9]/kill     # a path.Match glob
//	curl 127.0.0.1:PORT/nodes
//
// or as commands on stdin with --stdin ("kill sim-0003", "start sim-00*",
// "nodes", "report"). Every --report it prints a line: nodes Ready, pods
// Running, API requests per second, the process's CPU and RSS.
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
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/exutil"
)

type options struct {
	kubeconfig, server, token, ca string

	nodes       int
	first       int
	namePattern string
	nodeConfig  string
	cpu         string
	memory      string
	storage     string
	pods        int
	labels      string
	taints      string
	images      string

	leaseDuration time.Duration
	leaseRenew    time.Duration
	statusUpdate  time.Duration
	statusReport  time.Duration
	qps           float64
	burst         int
	nodeQPS       float64
	nodeBurst     int
	eventQPS      float64
	eventBurst    int
	startRate     float64
	events        bool
	eventedPLEG   bool
	noEviction    bool

	root      string
	control   string
	stdin     bool
	pprof     bool
	report    time.Duration
	duration  time.Duration
	verbose   bool
	verboseNK bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with one cluster and one token user (an admin: the simulator watches every node's pods)")
	fs.StringVar(&o.server, "server", "", "API server URL (instead of --kubeconfig)")
	fs.StringVar(&o.token, "token", "", "bearer token (with --server)")
	fs.StringVar(&o.ca, "ca", "", "CA certificate file of the API server (with --server)")
	fs.IntVar(&o.nodes, "nodes", 10, "how many nodes")
	fs.IntVar(&o.first, "first", 0, "the index of the first node")
	fs.StringVar(&o.namePattern, "name-pattern", "sim-%04d", "node names: one integer verb taking the index")
	fs.StringVar(&o.nodeConfig, "node-config", "", "YAML or JSON file of per-node capacity, labels and taints (entries matched by name glob, in order)")
	fs.StringVar(&o.cpu, "cpu", "4", "CPU capacity of each node")
	fs.StringVar(&o.memory, "memory", "16Gi", "memory capacity of each node")
	fs.StringVar(&o.storage, "ephemeral-storage", "100Gi", "ephemeral-storage capacity of each node")
	fs.IntVar(&o.pods, "pods", 110, "pods capacity of each node")
	fs.StringVar(&o.labels, "labels", "", "labels of every node: k=v,k=v")
	fs.StringVar(&o.taints, "taints", "", "taints of every node: key[=value]:Effect,...")
	fs.StringVar(&o.images, "fake-images", "busybox,registry.k8s.io/pause:3.10", "images every fake runtime has (others are pulled, instantly)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 40*time.Second, "node lease duration (whole seconds)")
	fs.DurationVar(&o.leaseRenew, "lease-renew", 0, "node lease renew interval; 0 = a quarter of --lease-duration")
	fs.DurationVar(&o.statusUpdate, "status-update", 10*time.Second, "how often each node computes its status (the kubelet's nodeStatusUpdateFrequency)")
	fs.DurationVar(&o.statusReport, "status-report", 5*time.Minute, "how often an unchanged node status is still sent (nodeStatusReportFrequency)")
	fs.Float64Var(&o.qps, "qps", 1000, "API requests per second of all nodes together (0: no limit)")
	fs.IntVar(&o.burst, "burst", 2000, "burst of --qps")
	fs.Float64Var(&o.nodeQPS, "node-qps", 50, "API requests per second of each node (0: no limit; the kubelet's kubeAPIQPS)")
	fs.IntVar(&o.nodeBurst, "node-burst", 100, "burst of --node-qps (the kubelet's kubeAPIBurst)")
	fs.Float64Var(&o.eventQPS, "event-qps", 0, "events per second of all nodes together, within --qps (0: no limit of their own; each node still has the kubelet's 50/s)")
	fs.IntVar(&o.eventBurst, "event-burst", 0, "burst of --event-qps (0: twice --event-qps)")
	fs.Float64Var(&o.startRate, "start-rate", 50, "nodes started per second (0: all at once)")
	fs.BoolVar(&o.events, "events", true, "write the agents' events to the API server")
	fs.BoolVar(&o.eventedPLEG, "evented-pleg", false, "follow each fake runtime's container events (relist every 300s) instead of relisting every second")
	fs.BoolVar(&o.noEviction, "no-eviction", false, "turn node-pressure eviction off")
	fs.StringVar(&o.root, "root", "", "state directory (a directory per node); default: a new temporary directory, removed at exit")
	fs.StringVar(&o.control, "control", "127.0.0.1:0", "loopback address of the control API (empty: none)")
	fs.BoolVar(&o.stdin, "stdin", false, "read control commands from stdin")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go's profiles on the control API (/debug/pprof/)")
	fs.DurationVar(&o.report, "report", 10*time.Second, "report interval (0: none)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long; 0 runs until Ctrl-C or SIGTERM")
	fs.BoolVar(&o.verbose, "v", false, "log what the simulator does (info level)")
	fs.BoolVar(&o.verboseNK, "v-nodes", false, "log what every agent does (a lot)")
}

// flagSet is a FlagSet with the simulator's flags bound to o.
func flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	o.register(fs)
	return fs
}

func main() {
	var o options
	o.register(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mainErr(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, o options) error {
	cfg, err := exutil.RestConfig(o.kubeconfig, o.server, o.token, o.ca)
	if err != nil {
		return err
	}
	cl, err := newAPIClients(cfg, float32(o.qps), o.burst, float32(o.nodeQPS), o.nodeBurst)
	if err != nil {
		return err
	}
	if err := cl.limitEvents(float32(o.eventQPS), o.eventBurstOrDefault()); err != nil {
		return err
	}
	var stdin io.Reader
	if o.stdin {
		stdin = os.Stdin
	}
	return run(ctx, o, cl, stdin, os.Stdout, nil)
}

// started is told the running simulator and its control address (nil
// without one); tests use it.
type started func(sim *simulator, rep *reporter, control net.Addr)

// run runs the simulator with cl's clients until ctx ends.
func run(ctx context.Context, o options, cl clients, stdin io.Reader, out io.Writer, onStart started) error {
	log := exlog.New(o.verbose)
	defer log.Sync() //nolint:errcheck // best effort on exit
	nodeLog := zap.NewNop()
	if o.verboseNK {
		nodeLog = log
	}
	if !o.verbose {
		// client-go's own messages (throttling waits, watch restarts) would
		// come from hundreds of nodes.
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	cfg, err := o.simConfig()
	if err != nil {
		return err
	}
	if o.root == "" {
		dir, err := os.MkdirTemp("", "nodekit-simulate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.root = dir
	}
	if cfg.Root, err = filepath.Abs(o.root); err != nil {
		return err
	}
	cfg.Log, cfg.NodeLog, cfg.Clients = log, nodeLog, cl
	sim, err := newSimulator(cfg)
	if err != nil {
		return err
	}
	rep := newReporter(sim)
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fmt.Fprintf(out, "nodekit simulate: %d nodes (%s ... %s), root %s\n", len(cfg.Names), cfg.Names[0], cfg.Names[len(cfg.Names)-1], cfg.Root)

	type result struct {
		name string
		err  error
	}
	results := make(chan result, 4)
	parts := 0
	launch := func(name string, f func() error) {
		parts++
		go func() { results <- result{name, f()} }()
	}
	launch("nodes", func() error { return sim.Run(ctx) })
	launch("node watch", func() error { rep.runNodeWatch(ctx); return nil })
	if o.report > 0 {
		launch("report", func() error { rep.loop(ctx, o.report, out); return nil })
	}
	var controlAddr net.Addr
	if o.control != "" {
		addrc := make(chan net.Addr, 1)
		launch("control", func() error {
			return serveControl(ctx, o.control, controlHandler(sim, rep, o.pprof), func(a net.Addr) { addrc <- a })
		})
		select {
		case controlAddr = <-addrc:
			fmt.Fprintf(out, "control API on http://%s (GET /nodes, POST /nodes/{glob}/{start|stop|kill|restart}, GET /report)\n", controlAddr)
		case r := <-results:
			cancel()
			for i := 1; i < parts; i++ {
				<-results
			}
			return fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	if stdin != nil {
		// The reader goroutine may stay blocked on stdin after ctx ends;
		// the process exits then.
		go readCommands(ctx, stdin, sim, rep, out)
	}
	if onStart != nil {
		onStart(sim, rep, controlAddr)
	}
	var errs []error
	for i := 0; i < parts; i++ {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
		}
		cancel()
	}
	if ctx.Err() != nil && len(errs) == 0 {
		fmt.Fprintln(out, "stopped; last report:", rep.latest())
	}
	return errors.Join(errs...)
}

// simConfig checks the flags and turns them into a simConfig (without
// clients, root and loggers).
// eventBurstOrDefault is --event-burst, or twice --event-qps.
func (o *options) eventBurstOrDefault() int {
	if o.eventBurst > 0 {
		return o.eventBurst
	}
	return max(int(2*o.eventQPS), 1)
}

func (o *options) simConfig() (simConfig, error) {
	var errs []error
	names, err := nodeNames(o.namePattern, o.nodes, o.first)
	if o.nodes < 1 || o.first < 0 {
		err = fmt.Errorf("--nodes %d, --first %d: want at least one node from index 0 on", o.nodes, o.first)
	} else if o.first+o.nodes > maxNodes {
		err = fmt.Errorf("--first + --nodes = %d: at most %d", o.first+o.nodes, maxNodes)
	}
	errs = append(errs, err)
	base := defaultSpec()
	var capErr error
	base.Pods = o.pods
	if o.pods < 1 {
		capErr = fmt.Errorf("--pods %d: want at least 1", o.pods)
	}
	errs = append(errs, capErr, base.setCapacity(map[string]string{"cpu": o.cpu, "memory": o.memory, "ephemeral-storage": o.storage}))
	labels, err := parseLabels(o.labels)
	errs = append(errs, err)
	taints, err := parseTaints(o.taints)
	errs = append(errs, err)
	base.Labels, base.Taints = labels, taints
	var file *specFile
	if o.nodeConfig != "" {
		file, err = readSpecFile(o.nodeConfig)
		errs = append(errs, err)
	}
	if o.leaseDuration < time.Second || o.leaseDuration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--lease-duration %v: whole seconds, at least 1s", o.leaseDuration))
	}
	if o.leaseRenew < 0 || (o.leaseRenew > 0 && o.leaseRenew >= o.leaseDuration) {
		errs = append(errs, fmt.Errorf("--lease-renew %v: positive and shorter than --lease-duration", o.leaseRenew))
	}
	for name, d := range map[string]time.Duration{"--status-update": o.statusUpdate, "--status-report": o.statusReport} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", name, d))
		}
	}
	if o.qps < 0 || o.nodeQPS < 0 || o.startRate < 0 || o.burst < 0 || o.nodeBurst < 0 || o.eventQPS < 0 || o.eventBurst < 0 {
		errs = append(errs, errors.New("--qps, --burst, --node-qps, --node-burst, --event-qps, --event-burst and --start-rate must not be negative"))
	}
	var images []string
	for _, im := range strings.Split(o.images, ",") {
		if im = strings.TrimSpace(im); im != "" {
			images = append(images, im)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return simConfig{}, err
	}
	return simConfig{
		Names: names,
		Specs: func(name string) nodeSpec {
			s := base
			file.apply(name, &s)
			return s
		},
		Images:                images,
		LeaseDurationSeconds:  int32(o.leaseDuration / time.Second),
		LeaseRenewInterval:    o.leaseRenew,
		StatusUpdateFrequency: o.statusUpdate,
		StatusReportFrequency: o.statusReport,
		StartRate:             o.startRate,
		Events:                o.events,
		EventedPLEG:           o.eventedPLEG,
		NoEviction:            o.noEviction,
	}, nil
}
