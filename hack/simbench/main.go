// Command simbench measures examples/simulate against a real kube-apiserver
// (hack/kube-apiserver.sh start), for each node count of -nodes:
//
//   - it builds examples/simulate and runs it as its own process with the
//     kubelet's default periods (lease 40 s renewed every 10 s, node status
//     computed every 10 s and sent every 5 min or on change), and waits for
//     every node to be Ready;
//   - it creates -pods-per-node pods per node (spec.nodeName, -image on
//     the fake runtime: by default a tagged pause image, pulled once per
//     node, as clusterloader2's density test) at -create-qps, and records for each the time
//     from its create request to the first watch event showing it Running
//     in the API server (p50, p99, max), and the CPU the simulator and
//     kube-apiserver used meanwhile (100% = one core);
//   - with -scheduler the pods have no spec.nodeName but a nodeSelector
//     on the run's node label, and kube-scheduler ($NODEKIT_KUBE_SCHEDULER,
//     built by hack/kube-apiserver.sh build; started for the run with the
//     admin kubeconfig) places them: create to Running then includes
//     scheduling and binding, and its CPU is reported beside the others.
//     The node lifecycle controller ($NODEKIT_NODELIFECYCLE_CONTROLLER)
//     runs beside it over the run's nodes, with kube-controller-manager's
//     periods, as in a cluster: it removes the not-ready:NoSchedule taint
//     the API server gives every new Node, once the node is Ready;
//   - after -settle, it measures over -window the simulator's CPU (its
//     getrusage, through its control API) and RSS, and the CPU of
//     kube-apiserver and etcd (/proc/<pid>/stat, pids from
//     $NODEKIT_APISERVER_DIR), and the simulator's API requests per second;
//   - it deletes the pods, stops the simulator and deletes its Nodes and
//     Leases.
//
// It prints one line per node count and the machine's load average before
// and after. Run it as root from the repository root:
//
//	set -a; . /tmp/nodekit-apiserver/env; set +a
//	go run ./hack/simbench -nodes 100,200
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/apiservertest"
	"github.com/nodekit/nodekit/internal/procmem"
)

type options struct {
	kubeconfig  string
	nodes       string
	podsPerNode int
	createQPS   float64
	settle      time.Duration
	window      time.Duration
	extraArgs   string
	image       string
	scheduler   bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("NODEKIT_ADMIN_KUBECONFIG"), "admin kubeconfig (default $NODEKIT_ADMIN_KUBECONFIG)")
	flag.StringVar(&o.nodes, "nodes", "100", "comma-separated node counts, one run each")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 10, "pods per node")
	flag.Float64Var(&o.createQPS, "create-qps", 100, "pod creations per second")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "wait after the pods run before the idle window")
	flag.DurationVar(&o.window, "window", 60*time.Second, "idle measurement window")
	flag.StringVar(&o.extraArgs, "args", "", "extra simulate flags, space-separated")
	// The pod startup SLO excludes image pulls: a tagged image (pull policy
	// IfNotPresent) is pulled by the first pod of each node only, as in
	// the scalability tests' pause pods. "busybox" (:latest, pull policy
	// Always) pulls for every pod: two more events per pod.
	flag.StringVar(&o.image, "image", "registry.k8s.io/pause:3.10", "the pods' container image")
	flag.BoolVar(&o.scheduler, "scheduler", false, "pods without spec.nodeName, placed by kube-scheduler ($NODEKIT_KUBE_SCHEDULER)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "simbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.kubeconfig == "" {
		return errors.New("-kubeconfig (or NODEKIT_ADMIN_KUBECONFIG) is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = float32(max(o.createQPS*2, 50)), int(max(o.createQPS*4, 100)), 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "nodekit-simbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "simulate")
	build := exec.Command("go", "build", "-o", bin, "./examples/simulate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building examples/simulate: %w", err)
	}
	fmt.Printf("load average before: %s\n", loadavg())
	fmt.Println("| nodes | pods | all Ready | create to Running p50 / p99 / max | CPU meanwhile: simulator / kube-apiserver | simulator RSS (per node) | simulator CPU idle (per node) | kube-apiserver CPU idle | etcd CPU idle | kube-apiserver RSS | API req/s idle |")
	fmt.Println("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
	var results []result
	for _, s := range strings.Split(o.nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes %q: %q is not a count", o.nodes, s)
		}
		res, err := runOnce(o, client, bin, dir, n)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		fmt.Println(res.line)
		results = append(results, res)
	}
	fmt.Printf("load average after: %s\n", loadavg())
	// Per added node, between runs: the process's fixed share (client-go,
	// the watches, the runtime) drops out.
	for i := 1; i < len(results); i++ {
		a, b := results[i-1], results[i]
		dn := float64(b.nodes - a.nodes)
		if dn <= 0 {
			continue
		}
		fmt.Printf("from %d to %d nodes, per added node: RSS %.2f MB, CPU idle %.2f mcore, kube-apiserver CPU idle %.2f mcore\n",
			a.nodes, b.nodes, float64(b.rss-a.rss)/1e6/dn, (b.cpu-a.cpu)*1000/dn, (b.apiCPU-a.apiCPU)*1000/dn)
	}
	return nil
}

// report is what GET /report of the simulator's control API returns.
type report struct {
	NodesReady  int     `json:"nodesReady"`
	PodsRunning int     `json:"podsRunning"`
	APIRequests float64 `json:"apiRequestsPerSecond"`
	CPU         float64 `json:"cpuCores"`
	RSSBytes    int64   `json:"rssBytes"`
}

// result is one run's table line and figures.
type result struct {
	line        string
	nodes       int
	rss         int64
	cpu, apiCPU float64
}

func runOnce(o options, client kubernetes.Interface, bin, dir string, n int) (result, error) {
	ctx := context.Background()
	id := strconv.FormatInt(time.Now().Unix()%(36*36*36), 36)
	prefix := "bench-" + id + "-"
	ns := "simbench-" + id
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	defer client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) //nolint:errcheck // best effort
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	args := []string{"--kubeconfig", o.kubeconfig, "--nodes", strconv.Itoa(n), "--name-pattern", prefix + "%05d",
		"--report", "0", "--control", "127.0.0.1:0", "--root", filepath.Join(dir, "root-"+id)}
	if o.extraArgs != "" {
		args = append(args, strings.Fields(o.extraArgs)...)
	}
	// With -scheduler the run's nodes carry a label the pods select, so
	// the scheduler places them on these nodes only.
	const runLabel = "simbench.nodekit.io/run"
	var sched *exec.Cmd
	if o.scheduler {
		args = append(args, "--labels", runLabel+"="+id)
		nlc, err := startControlPlane(dir, "NODEKIT_NODELIFECYCLE_CONTROLLER", "nodelifecycle-controller",
			"--kubeconfig", o.kubeconfig, "--taint-eviction=false", "--node-selector", runLabel+"="+id)
		if err != nil {
			return result{}, err
		}
		defer stopProcess(nlc)
		if sched, err = startScheduler(o, dir); err != nil {
			return result{}, err
		}
		defer stopProcess(sched)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer cleanup(client, prefix)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	control := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "control API on "); ok {
				control <- strings.Fields(rest)[0]
			}
		}
	}()
	var base string
	select {
	case base = <-control:
	case <-time.After(60 * time.Second):
		return result{}, errors.New("the simulator printed no control address")
	}
	get := func() (report, error) {
		var r report
		resp, err := http.Get(base + "/report")
		if err != nil {
			return r, err
		}
		defer resp.Body.Close()
		return r, json.NewDecoder(resp.Body).Decode(&r)
	}
	t0 := time.Now()
	if err := waitFor(10*time.Minute, func() (bool, error) { r, err := get(); return r.NodesReady == n, err }); err != nil {
		return result{}, fmt.Errorf("nodes Ready: %w", err)
	}
	readyIn := time.Since(t0)
	if o.scheduler {
		// The pods are created once the controller has untainted every
		// node (a pod created before would wait for the scheduler's retry).
		if err := waitFor(5*time.Minute, func() (bool, error) { return untainted(ctx, client, prefix, n) }); err != nil {
			return result{}, fmt.Errorf("nodes untainted: %w", err)
		}
	}

	w := apiservertest.WatchPods(ctx, client, ns, clock.RealClock{})
	defer w.Stop()
	for !w.HasSynced() {
		time.Sleep(50 * time.Millisecond)
	}
	total := n * o.podsPerNode
	names := make([]string, 0, total)
	for i := 0; i < n; i++ {
		for j := 0; j < o.podsPerNode; j++ {
			names = append(names, fmt.Sprintf("p-%05d-%03d", i, j))
		}
	}
	every := time.Duration(float64(time.Second) / o.createQPS)
	api, etcd := pidOf("kube-apiserver"), pidOf("etcd")
	if _, err := get(); err != nil { // starts the simulator's CPU interval
		return result{}, err
	}
	schedPid := 0
	if sched != nil {
		schedPid = sched.Process.Pid
	}
	busyAt, busyAPI, busySched := time.Now(), procCPU(api), procCPU(schedPid)
	if err := parallel(names, every, func(name string) error {
		var i int
		fmt.Sscanf(name, "p-%05d", &i)
		no := false
		w.Creating(name)
		spec := v1.PodSpec{NodeName: fmt.Sprintf(prefix+"%05d", i), AutomountServiceAccountToken: &no,
			Containers: []v1.Container{{Name: "c", Image: o.image}}}
		if o.scheduler {
			spec.NodeName, spec.NodeSelector = "", map[string]string{runLabel: id}
		}
		_, err := client.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return result{}, err
	}
	if err := waitFor(10*time.Minute, func() (bool, error) { return w.Running() == total, nil }); err != nil {
		return result{}, fmt.Errorf("pods Running (%d of %d): %w", w.Running(), total, err)
	}
	lat := w.RunningLatencies()
	busy, err := get()
	if err != nil {
		return result{}, err
	}
	busySecs := time.Since(busyAt).Seconds()
	busyAPICPU := (procCPU(api) - busyAPI).Seconds() / busySecs
	schedCPU := ""
	if sched != nil {
		schedCPU = fmt.Sprintf(" / kube-scheduler %.0f%%", (procCPU(schedPid)-busySched).Seconds()/busySecs*100)
	}

	time.Sleep(o.settle)
	if _, err := get(); err != nil { // starts the simulator's CPU interval
		return result{}, err
	}
	api0, etcd0 := procCPU(api), procCPU(etcd)
	time.Sleep(o.window)
	r, err := get()
	if err != nil {
		return result{}, err
	}
	secs := o.window.Seconds()
	apiCPU, etcdCPU := (procCPU(api)-api0).Seconds()/secs, (procCPU(etcd)-etcd0).Seconds()/secs
	if r.PodsRunning != total {
		return result{}, fmt.Errorf("only %d of %d pods Running in the idle window", r.PodsRunning, total)
	}
	_ = parallel(names, 0, func(name string) error {
		zero := int64(0)
		return client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	line := fmt.Sprintf("| %d | %d | %.1f s | %s / %s / %s | %.0f%% / %.0f%%%s | %.0f MB (%.2f MB) | %.1f%% of a core (%.2f mcore) | %.1f%% of a core | %.1f%% of a core | %.0f MB | %.1f |",
		n, total, readyIn.Seconds(), pct(lat, 50), pct(lat, 99), pct(lat, 100), busy.CPU*100, busyAPICPU*100, schedCPU,
		float64(r.RSSBytes)/1e6, float64(r.RSSBytes)/1e6/float64(n), r.CPU*100, r.CPU*1000/float64(n),
		apiCPU*100, etcdCPU*100, float64(procRSS(api))/1e6, r.APIRequests)
	return result{line: line, nodes: n, rss: r.RSSBytes, cpu: r.CPU, apiCPU: apiCPU}, nil
}

func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	i := (len(d)*p + 99) / 100
	return d[max(0, min(len(d)-1, i-1))].Round(10 * time.Millisecond).String()
}

// parallel runs f for every name with 16 workers, starting one every
// `every` (0: as fast as they go).
func parallel(names []string, every time.Duration, f func(string) error) error {
	ch := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for k := 0; k < 16; k++ {
		wg.Go(func() {
			for name := range ch {
				if err := f(name); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	next := time.Now()
	for _, n := range names {
		if every > 0 {
			time.Sleep(time.Until(next))
			next = next.Add(every)
		}
		ch <- n
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d failed, first: %w", len(errs), errs[0])
	}
	return nil
}

func waitFor(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("timed out after %v (last error: %v)", timeout, last)
}

// startScheduler starts kube-scheduler ($NODEKIT_KUBE_SCHEDULER) with the
// admin kubeconfig, leader election off, no serving port, and client
// limits above the creation rate (a binding and an event per pod).
func startScheduler(o options, dir string) (*exec.Cmd, error) {
	qps := max(o.createQPS*4, 100)
	conf := filepath.Join(dir, "kube-scheduler.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: %g, burst: %d}
leaderElection: {leaderElect: false}
`, o.kubeconfig, qps, int(qps*2))), 0o600); err != nil {
		return nil, err
	}
	return startControlPlane(dir, "NODEKIT_KUBE_SCHEDULER", "kube-scheduler", "--config", conf, "--secure-port", "0")
}

// startControlPlane starts the binary named by $env (built by
// hack/kube-apiserver.sh build, set by its start), its output in
// <dir>/<name>.log.
func startControlPlane(dir, env, name string, args ...string) (*exec.Cmd, error) {
	bin := os.Getenv(env)
	if bin == "" {
		return nil, fmt.Errorf("-scheduler: %s is not set (hack/kube-apiserver.sh build makes it, start sets it)", env)
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with simbench
	return cmd, cmd.Start()
}

func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// untainted: the n Nodes named prefix* exist without the not-ready or
// unreachable taints.
func untainted(ctx context.Context, c kubernetes.Interface, prefix string, n int) (bool, error) {
	l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	k := 0
	for _, node := range l.Items {
		if !strings.HasPrefix(node.Name, prefix) {
			continue
		}
		for _, t := range node.Spec.Taints {
			if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
				return false, nil
			}
		}
		k++
	}
	return k == n, nil
}

// cleanup deletes the run's Nodes and Leases.
func cleanup(c kubernetes.Interface, prefix string) {
	ctx := context.Background()
	l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var names []string
	for _, n := range l.Items {
		if strings.HasPrefix(n.Name, prefix) {
			names = append(names, n.Name)
		}
	}
	_ = parallel(names, 0, func(name string) error {
		_ = c.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		return c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// pidOf reads <NODEKIT_APISERVER_DIR>/<name>.pid (0 if missing).
func pidOf(name string) int {
	dir := os.Getenv("NODEKIT_APISERVER_DIR")
	if dir == "" {
		dir = "/tmp/nodekit-apiserver"
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// procCPU is the user+system CPU time of pid (0 if unknown).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// procRSS is the VmRSS of pid in bytes (0 if unknown).
func procRSS(pid int) int64 {
	st, err := procmem.Read(pid)
	if err != nil {
		return 0
	}
	return int64(st.RSS)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
