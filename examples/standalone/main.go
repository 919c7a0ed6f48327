// Command standalone is a small node agent built with nodekit: it runs the
// static pods of a manifest directory and shows what happens to them in a
// table refreshed every second.
//
// With no flags it runs on the in-memory fake runtime (no root, no
// containerd) with the example manifests shipped beside it:
//
//	go run ./examples/standalone
//
// Against a real CRI runtime (host-network pods need no CNI):
//
//	go run ./examples/standalone --runtime-endpoint unix:///run/containerd/containerd.sock --manifests /etc/nodekit/manifests
//
// --config FILE reads a kubelet configuration file (KubeletConfiguration)
// in a binary built with -tags kubeletconfig: see the help text.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/containerdwire"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
	"github.com/nodekit/nodekit/nodeshutdown"
	"github.com/nodekit/nodekit/pleg"
)

//go:embed manifests/*.yaml
var shipped embed.FS

const help = `standalone runs the static pods of a manifest directory with nodekit and
shows their status. Edit, add or remove manifests while it runs: it picks the
changes up within a second.

Without --runtime-endpoint it uses an in-memory fake runtime (no root needed)
and, without --manifests, the example pods shipped with it (copied into the
root directory so you can edit them there).

It is an agent, not a supervisor: on Ctrl-C or SIGTERM the agent stops, but
containers it started on a real runtime are left running. Start it again with
the same --root and --manifests and it takes them over without restarting them.
Delete the manifests (and wait for the pods to stop) to stop the pods.

It serves /healthz on 127.0.0.1:10248 (--healthz-port) and, with --port, the
kubelet's HTTPS API (pods, container logs, exec, attach, port-forward) to
clients with a certificate of --client-ca-file.

--config FILE (in a binary built with -tags kubeletconfig) reads a kubelet
configuration file (kubelet.config.k8s.io/v1beta1 KubeletConfiguration, YAML or
JSON) as the kubelet does: staticPodPath,
staticPodURL(+Header), containerRuntimeEndpoint, the health port, maxPods,
syncFrequency, fileCheckFrequency, image pull serialization and the rest package
kubeletconfig maps; a flag given on the command line wins over the file. The
HTTPS API is served only when the file sets port (or --port is given), and
container logs stay under --root unless the file sets podLogsDir. Fields the
agent does not support are named in one warning; invalid values stop it.

Flags:
`

type options struct {
	manifests  string
	endpoint   string
	root       string
	nodeName   string
	nodeIPs    string
	duration   time.Duration
	verbose    bool
	statusFile string
	statusLog  string
	evented    bool
	// eventedSet: -evented-pleg was given on the command line.
	eventedSet   bool
	relistPeriod time.Duration
	cpuProfile   string
	// maxProcs: GOMAXPROCS for the agent (0: Go's default).
	maxProcs int
	// containerdEvents: follow containerd's own exit events (with
	// --runtime-endpoint only).
	containerdEvents bool
	// manifestURL and manifestURLHeaders: a URL source (the kubelet's
	// --manifest-url and --manifest-url-header).
	manifestURL        string
	manifestURLHeaders headerFlag
	// pushAddr: serve the HTTP push source on this address.
	pushAddr string
	api      apiFlags
	// shutdown: the graceful node shutdown flags.
	shutdown exshutdown.Flags
	// config is --config; given the flags given on the command line.
	config string
	given  exconfig.Given
}

// headerFlag collects repeated "Name:value" flags into an http.Header.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q is not Name:value", s)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	return nil
}

func main() {
	var o options
	flag.StringVar(&o.manifests, "manifests", "", "directory (or file) of static pod manifests; default: the shipped examples")
	flag.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI endpoint (unix:///path); empty: the in-memory fake runtime")
	flag.StringVar(&o.root, "root", "", "state directory; default: a new temporary directory, removed at exit")
	flag.StringVar(&o.nodeName, "node-name", "", "node name (static pods are named <name>-<node>); default: the host name")
	flag.StringVar(&o.nodeIPs, "node-ip", "", "IP address of the node, or two comma-separated (one per IP family) for dual-stack: every pod's host IP (status.hostIP, env fieldRef status.hostIP) and the pod IP of host-network pods; default: none, as the kubelet without an API server")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long; 0 runs until Ctrl-C or SIGTERM")
	flag.BoolVar(&o.verbose, "v", false, "log what the agent does (info level); otherwise only warnings")
	flag.StringVar(&o.statusFile, "status-file", "", "write the pods' statuses as JSON to this file whenever they change")
	flag.StringVar(&o.statusLog, "status-log", "", "append one JSON line per pod status the agent reports (as its status manager delivers it, with the time) to this file")
	flag.BoolVar(&o.evented, "evented-pleg", true, "follow the runtime's container events (CRI GetContainerEvents); falls back to relisting when the runtime lacks them (containerd 1.6); off by default with --relist-period")
	flag.DurationVar(&o.relistPeriod, "relist-period", 0, "relist the runtime this often (the relisting PLEG's pause between relists); 0: the default (1s); turns --evented-pleg off unless it is given")
	flag.BoolVar(&o.containerdEvents, "containerd-events", false, "with --runtime-endpoint: also follow containerd's own task exit events on that socket, so a container's exit shows in its pod status within milliseconds instead of at the next relist (containerd 1.6's CRI has no container events and reports exits late); ignored with a warning when the runtime is not containerd. A restart after such an exit waits until containerd's CRI no longer lists the old container running (it lags the event by up to a few hundred milliseconds). Off by default: the kubelet's behaviour is to relist")
	flag.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the whole run to this file (go tool pprof); needs a binary built with -tags pprof")
	flag.IntVar(&o.maxProcs, "max-procs", 0, "run Go code on at most this many CPUs at once (GOMAXPROCS); 0: Go's default (all of them). An agent waits on the runtime far more than it computes: 1 saves the Go scheduler's hand-offs between threads (starting 30 pods on a 2-CPU VM: a quarter less CPU, the same start times; see hack/e2ebench/RESULTS.md)")
	flag.StringVar(&o.manifestURL, "manifest-url", "", "also run the static pods served at this URL (a Pod or PodList, YAML or JSON), fetched every 20 s, as the kubelet's --manifest-url")
	flag.Var(&o.manifestURLHeaders, "manifest-url-header", "a 'Name:value' HTTP header sent with every --manifest-url request (repeatable), as the kubelet's")
	flag.StringVar(&o.pushAddr, "push-addr", "", "also take static pods pushed over HTTP on this address (e.g. 127.0.0.1:10260): POST a Pod or PodList, DELETE /<namespace>/<name>, GET the list. No authentication: keep it on loopback")
	flag.StringVar(&o.config, "config", "", "kubelet configuration file (kubelet.config.k8s.io/v1beta1 KubeletConfiguration); the flags given override it (a binary built with -tags kubeletconfig)")
	o.api.register(flag.CommandLine)
	o.shutdown.Register(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), help)
		flag.PrintDefaults()
	}
	flag.Parse()
	o.given = exconfig.GivenFlags(flag.CommandLine)
	o.eventedSet = o.given["evented-pleg"]

	if err := applyMaxProcs(o.maxProcs); err != nil {
		fmt.Fprintln(os.Stderr, "standalone:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), o.shutdown.StopSignals()...)
	defer stop()
	stopProfile := func() {}
	if o.cpuProfile != "" {
		var err error
		if stopProfile, err = startCPUProfile(o.cpuProfile); err != nil {
			fmt.Fprintln(os.Stderr, "standalone: cpu profile:", err)
			os.Exit(1)
		}
	}
	err := run(ctx, o)
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "standalone:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := exlog.New(o.verbose)
	defer log.Sync() //nolint:errcheck // best effort on exit

	if o.root == "" {
		dir, err := os.MkdirTemp("", "nodekit-standalone-")
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
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	file, err := loadConfig(&o, root)
	if err != nil {
		return err
	}
	if o.manifests == "" {
		o.manifests = filepath.Join(root, "manifests")
		if err := copyShipped(o.manifests); err != nil {
			return err
		}
		file.setStaticPodPath(o.manifests)
	}
	if o.nodeName == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "nodekit"
		}
		o.nodeName = strings.ToLower(h)
	}

	if o.relistPeriod < 0 {
		return fmt.Errorf("--relist-period %v is negative", o.relistPeriod)
	}
	if o.relistPeriod > 0 {
		if o.eventedSet && o.evented {
			// An EventedPLEG that falls back to relisting sets its own
			// period (pleg.DefaultRelistPeriod): the Builder has no option
			// to change it yet.
			return errors.New("--relist-period applies to the relisting PLEG only: give --evented-pleg=false (or leave it out)")
		}
		o.evented = false
	}

	// Each pod's last Warning event, for the table.
	warnings, err := events.NewLastWarnings(events.LastWarningsConfig{})
	if err != nil {
		return err
	}
	b := nodekit.NewBuilder().
		WithIdleMemoryRelease(true). // the process runs one agent
		WithNodeName(o.nodeName).
		WithRootDir(root).
		WithLogger(log).
		WithEventRecorder(warnings)
	if file == nil {
		b.WithManifestDir(o.manifests)
		if o.manifestURL != "" {
			b.WithManifestURL(o.manifestURL, o.manifestURLHeaders.h)
		}
	}
	if o.pushAddr != "" {
		b.WithPushSource(o.pushAddr)
	}
	if o.nodeIPs != "" {
		b.WithNodeIPs(strings.Split(o.nodeIPs, ",")...)
	}
	if o.evented {
		b.WithEventedPLEG()
	} else {
		b.WithRelistPLEG()
	}
	if o.statusLog != "" {
		f, err := os.OpenFile(o.statusLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		b.WithStatusSink(newLogSink(f))
	}
	runtimeName := o.endpoint
	if o.endpoint == "" {
		b.WithFakeRuntime("localhost/nodekit/busybox:1")
		runtimeName = "in-memory fake runtime"
	} else {
		if file == nil {
			b.WithRuntimeEndpoint(o.endpoint)
		}
		if o.containerdEvents {
			containerdwire.Events(b, "", nil)
		}
	}
	if err := file.apply(b, &o, log); err != nil {
		return err
	}
	if err := o.api.wire(b, o.nodeName, root); err != nil {
		return err
	}
	sd, err := o.shutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{Logger: log}})
	if err != nil {
		return err
	}
	agent, err := b.Build()
	if err != nil {
		return err
	}
	if o.relistPeriod > 0 {
		agent.PLEG().SetRelistPeriod(o.relistPeriod, max(pleg.DefaultRelistThreshold, 10*o.relistPeriod))
	}
	fmt.Printf("nodekit standalone: node %s, runtime %s\nmanifests: %s\nroot: %s\n\n", o.nodeName, runtimeName, o.manifests, root)

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
		show(showCtx, agent, warnings, o.statusFile)
	}()
	// With --shutdown-on-sigterm a SIGTERM shuts the node down gracefully,
	// then stops the agent.
	err = o.shutdown.Run(ctx, sd, log, func(ctx context.Context) error {
		defer stopShow()
		return agent.Run(ctx)
	})
	<-shown
	if err == nil {
		fmt.Println("\nagent stopped; containers on a real runtime keep running")
	}
	return err
}

// applyMaxProcs sets GOMAXPROCS to n when n > 0; 0 leaves Go's default.
func applyMaxProcs(n int) error {
	if n < 0 {
		return fmt.Errorf("--max-procs must be 0 (Go's default) or more, not %d", n)
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	return nil
}

// copyShipped writes the embedded example manifests into dir.
func copyShipped(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(shipped, "manifests", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := shipped.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, d.Name()), data, 0o644)
	})
}

// PodReport is one pod in the status file.
type PodReport struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	UID       string      `json:"uid"`
	Phase     v1.PodPhase `json:"phase"`
	Ready     string      `json:"ready"`
	Restarts  int32       `json:"restarts"`
	Reason    string      `json:"reason,omitempty"`
	PodIP     string      `json:"podIP,omitempty"`
	HostIP    string      `json:"hostIP,omitempty"`
	// LastWarning is the pod's last Warning event: "Reason: message".
	LastWarning string            `json:"lastWarning,omitempty"`
	Containers  []ContainerReport `json:"containers"`
}

// ContainerReport is one container in the status file.
type ContainerReport struct {
	Name         string `json:"name"`
	ContainerID  string `json:"containerID"`
	State        string `json:"state"`
	Ready        bool   `json:"ready"`
	RestartCount int32  `json:"restartCount"`
}

// report gathers the status of every pod the agent runs, sorted by name.
func report(agent *nodekit.Agent, warnings *events.LastWarnings) []PodReport {
	var out []PodReport
	for _, pod := range agent.Pods() {
		st, ok := agent.StatusManager().GetPodStatus(pod.UID)
		if !ok {
			st = v1.PodStatus{Phase: v1.PodPending}
		}
		r := PodReport{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Phase: st.Phase, Reason: st.Reason,
			PodIP: st.PodIP, HostIP: st.HostIP}
		if r.Reason == "" {
			r.Reason = st.Message
		}
		// READY counts app containers and sidecars, as kubectl does.
		ready, total := 0, len(pod.Spec.Containers)
		sidecars := map[string]bool{}
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				sidecars[c.Name] = true
				total++
			}
		}
		all := append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...)
		for _, cs := range all {
			state, why := containerState(cs)
			if r.Reason == "" && why != "" {
				r.Reason = cs.Name + ": " + why
			}
			r.Restarts += cs.RestartCount
			r.Containers = append(r.Containers, ContainerReport{
				Name: cs.Name, ContainerID: cs.ContainerID, State: state, Ready: cs.Ready, RestartCount: cs.RestartCount,
			})
		}
		for _, cs := range all {
			if cs.Ready && (sidecars[cs.Name] || !isInit(pod, cs.Name)) {
				ready++
			}
		}
		r.Ready = fmt.Sprintf("%d/%d", ready, total)
		if w, ok := warnings.Last(pod.UID); ok {
			r.LastWarning = firstLine(w.Reason + ": " + w.Message)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func isInit(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func containerState(cs v1.ContainerStatus) (state, reason string) {
	switch {
	case cs.State.Running != nil:
		return "running", ""
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		return "terminated", fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode)
	case cs.State.Waiting != nil:
		w := cs.State.Waiting
		if w.Message != "" && w.Reason != "ContainerCreating" {
			return "waiting", w.Reason + ": " + firstLine(w.Message)
		}
		return "waiting", w.Reason
	}
	return "unknown", ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func table(w io.Writer, pods []PodReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPHASE\tREADY\tRESTARTS\tREASON\tLAST WARNING")
	for _, p := range pods {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%s\t%s\n", p.Namespace, p.Name, p.Phase, p.Ready, p.Restarts, p.Reason, p.LastWarning)
	}
	if len(pods) == 0 {
		fmt.Fprintln(tw, "(no pods yet)")
	}
	tw.Flush()
}

// show prints the table every second until ctx ends: on a terminal it
// redraws the screen, otherwise it prints a new table only when it changed.
// It also keeps the status file up to date.
func show(ctx context.Context, agent *nodekit.Agent, warnings *events.LastWarnings, statusFile string) {
	select {
	case <-agent.Ready():
	case <-ctx.Done():
		return
	case <-agent.Done():
		return
	}
	fi, err := os.Stdout.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last string
	var lastPods []PodReport
	written := false
	for {
		pods := report(agent, warnings)
		var sb strings.Builder
		table(&sb, pods)
		if tty {
			fmt.Printf("\033[H\033[2J%s  (Ctrl-C stops the agent)\n\n%s", time.Now().Format("15:04:05"), sb.String())
		} else if sb.String() != last {
			fmt.Printf("%s\n%s\n", time.Now().Format("15:04:05"), sb.String())
		}
		last = sb.String()
		// The file is rewritten only when a pod's report changed: most
		// ticks nothing did, and encoding every pod costs more than
		// comparing the reports.
		if statusFile != "" && (!written || !reflect.DeepEqual(pods, lastPods)) {
			data, _ := json.MarshalIndent(pods, "", "  ")
			if err := writeAtomic(statusFile, data); err != nil {
				fmt.Fprintln(os.Stderr, "standalone: status file:", err)
			} else {
				written, lastPods = true, pods
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-agent.Done():
			return
		case <-tick.C:
		}
	}
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
