//go:build e2e

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/examples/internal/exutil"
	"github.com/nodekit/nodekit/internal/apiservertest"
)

// The e2e scale: 200 nodes with 10 pods each, periods scaled so that it
// fits a 2-core machine running the API server too (CI) in about 2
// minutes.
const (
	e2ePodsPerNode = 10
	e2eKilled      = 10
	// e2eLease: nodes renew every e2eRenew; the node lifecycle controller
	// takes a node whose lease is e2eGrace old as gone.
	e2eLease = 20 * time.Second
	e2eRenew = 4 * time.Second
	e2eGrace = 30 * time.Second
	// e2eTermGrace is the grace period of the pods that ignore SIGTERM.
	e2eTermGrace = 5
)

// TestSimulatedNodesAgainstAPIServer runs 200 simulated nodes against the
// real kube-apiserver: they register and go Ready; 2,000 pods bound to
// them by spec.nodeName run and are Running in the API server; deleting
// them terminates each with its grace period (a pod that handles SIGTERM
// ends at once with exit 0, one that ignores it is killed with 137 after
// its 5 s); killing 10 nodes stops their lease renewals and, with the
// upstream node lifecycle controller, makes their Nodes NotReady, while
// the other 190 stay Ready with fresh leases.
func TestSimulatedNodesAgainstAPIServer(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start an API server with `bash hack/kube-apiserver.sh start` and load its env")
	}
	adminKC := os.Getenv("NODEKIT_ADMIN_KUBECONFIG")
	if adminKC == "" {
		t.Fatal("NODEKIT_ADMIN_KUBECONFIG must be set with NODEKIT_APISERVER_URL")
	}
	restCfg, err := exutil.RestConfig(adminKC, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	// NODEKIT_SIMULATE_NODES scales the test down for a machine too busy
	// to run 200 (the kill step needs more than 10).
	e2eNodes := 200
	if v := os.Getenv("NODEKIT_SIMULATE_NODES"); v != "" {
		if e2eNodes, err = strconv.Atoi(v); err != nil || e2eNodes <= e2eKilled {
			t.Fatalf("NODEKIT_SIMULATE_NODES=%q: want a number above %d", v, e2eKilled)
		}
	}
	ctx := t.Context()
	start := time.Now()
	adminCfg := rest.CopyConfig(restCfg)
	adminCfg.QPS, adminCfg.Burst = 300, 600
	adminCfg.Timeout = 0 // the pod watch lasts minutes
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	runID := strconv.FormatInt(time.Now().UnixNano()/1e6%(36*36*36*36), 36)
	prefix := "sim-" + runID + "-"
	ns := "simulate-" + runID
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller manager makes the namespace's default service account.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nlc := startNodeLifecycleController(t, adminKC, runLabel+"="+runID)

	o := options{
		nodes: e2eNodes, namePattern: prefix + "%03d", labels: runLabel + "=" + runID, cpu: "4", memory: "16Gi", storage: "100Gi", pods: 110,
		images: "busybox", leaseDuration: e2eLease, leaseRenew: e2eRenew, statusUpdate: 10 * time.Second,
		statusReport: time.Minute, qps: 400, burst: 800, nodeQPS: 10, nodeBurst: 20, startRate: 100,
		// No events: 2,000 pods would write about 8,000, doubling the API
		// server's work (events are tested in test/e2e).
		events: false, report: 10 * time.Second, root: t.TempDir(),
	}
	type handle struct {
		sim *simulator
		rep *reporter
	}
	up := make(chan handle, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	cl, err := newAPIClients(restCfg, float32(o.qps), o.burst, float32(o.nodeQPS), o.nodeBurst)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- run(runCtx, o, cl, nil, testWriter{t}, func(s *simulator, r *reporter, _ net.Addr) { up <- handle{s, r} })
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("simulator: %v", err)
		}
		cleanupNodes(t, admin, prefix)
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	var h handle
	select {
	case h = <-up:
	case err := <-done:
		t.Fatalf("simulator stopped: %v", err)
	}

	// 1. Every node registers and goes Ready.
	poll(t, 120*time.Second, fmt.Sprintf("%d nodes Ready", e2eNodes), func() (bool, string) {
		r := h.rep.measure()
		return r.NodesReady == e2eNodes, r.String()
	})
	t.Logf("%v: %d nodes Ready", time.Since(start).Round(time.Second), e2eNodes)

	// 2. 2,000 pods bound by spec.nodeName reach Running. Half handle
	// SIGTERM (exit 0 at once), half ignore it (killed after 5 s, 137).
	w := watchPods(t, admin, ns)
	created := time.Now()
	var names []string
	for i := 0; i < e2eNodes; i++ {
		for j := 0; j < e2ePodsPerNode; j++ {
			names = append(names, fmt.Sprintf("p-%03d-%02d", i, j))
		}
	}
	parallel(t, names, func(name string) error {
		var i, j int
		fmt.Sscanf(name, "p-%03d-%02d", &i, &j)
		behavior := "sigterm=ignore"
		if j%2 == 0 {
			behavior = "sigterm=handle"
		}
		grace := int64(e2eTermGrace)
		no := false
		w.Creating(name)
		_, err := admin.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"fake.nodekit.io/behavior.c": behavior}},
			Spec: v1.PodSpec{
				NodeName: fmt.Sprintf(o.namePattern, i), TerminationGracePeriodSeconds: &grace,
				AutomountServiceAccountToken: &no,
				Containers:                   []v1.Container{{Name: "c", Image: "busybox"}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	t.Logf("%v: %d pods created in %v", time.Since(start).Round(time.Second), len(names), time.Since(created).Round(time.Millisecond))
	poll(t, 180*time.Second, fmt.Sprintf("%d pods Running", len(names)), func() (bool, string) {
		r := h.rep.measure()
		return r.PodsRunning == len(names), r.String()
	})
	lat := w.RunningLatencies()
	t.Logf("%v: %d pods Running; create request to Running in the API server: p50 %v, p99 %v, max %v",
		time.Since(start).Round(time.Second), len(lat), pct(lat, 50), pct(lat, 99), pct(lat, 100))
	t.Log(h.rep.measure())

	// 3. Deleting the pods terminates them with their grace periods.
	deleted := time.Now()
	parallel(t, names, func(name string) error {
		w.Deleting(name)
		return admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	poll(t, 180*time.Second, "every pod deleted", func() (bool, string) {
		n := w.Gone()
		return n == len(names), fmt.Sprintf("%d of %d gone", n, len(names))
	})
	t.Logf("%v: every pod terminated and deleted in %v", time.Since(start).Round(time.Second), time.Since(deleted).Round(time.Millisecond))
	checkTermination(t, w, names)

	// 4. Killing 10 nodes: their leases are no longer renewed and (with
	// the node lifecycle controller) they go NotReady; the rest stay
	// Ready with fresh leases.
	killed := map[string]bool{}
	for i := 0; i < e2eKilled; i++ {
		killed[fmt.Sprintf(o.namePattern, i)] = true
	}
	if got, err := h.sim.act("kill", prefix+"00[0-9]"); err != nil || len(got) != e2eKilled {
		t.Fatalf("kill = %v, %v", got, err)
	}
	killedAt := time.Now()
	// checkNodes: a killed node's lease must never be renewed after the
	// kill (its agent has returned); it returns what is wrong with the
	// live nodes (a lease older than its duration, not Ready).
	checkNodes := func() []string {
		var live []string
		leases := leasesOf(t, admin, prefix)
		for i := 0; i < e2eNodes; i++ {
			name := fmt.Sprintf(o.namePattern, i)
			l := leases[name]
			if l == nil || l.Spec.RenewTime == nil {
				live = append(live, name+": no lease")
				continue
			}
			renew := l.Spec.RenewTime.Time
			if killed[name] {
				if renew.After(killedAt.Add(time.Second)) {
					t.Fatalf("%s: killed at %v, but its lease was renewed at %v", name, killedAt, renew)
				}
				continue
			}
			if age := time.Since(renew); age > e2eLease {
				live = append(live, fmt.Sprintf("%s: live, lease %v old", name, age.Round(time.Millisecond)))
			}
		}
		for _, n := range nodesOf(t, admin, prefix) {
			if !killed[n.Name] && !nodeReady(&n) {
				live = append(live, n.Name+": live, but not Ready")
			}
		}
		return live
	}
	what := "the killed nodes' leases expire"
	if nlc {
		what += " and their Nodes go NotReady"
	}
	transient := 0
	poll(t, 120*time.Second, what, func() (bool, string) {
		if live := checkNodes(); len(live) > 0 {
			// Logged, not failed: an API server starved of CPU can delay
			// a renewal past the grace period. The live nodes must be
			// Ready with fresh leases at the end (below).
			transient++
			t.Logf("during the wait: %s", strings.Join(live, "; "))
		}
		leases := leasesOf(t, admin, prefix)
		var waiting []string
		for name := range killed {
			l := leases[name]
			dur := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
			if time.Since(l.Spec.RenewTime.Time) <= dur {
				waiting = append(waiting, name+": lease not expired yet")
			}
		}
		if nlc {
			for _, n := range nodesOf(t, admin, prefix) {
				if killed[n.Name] && nodeReady(&n) {
					waiting = append(waiting, n.Name+": still Ready")
				}
			}
		}
		slices.Sort(waiting)
		return len(waiting) == 0, strings.Join(waiting, "; ")
	})
	t.Logf("%v: the %d killed nodes' leases expired (NotReady checked: %v) %v after the kill; live-node problems seen in %d polls",
		time.Since(start).Round(time.Second), e2eKilled, nlc, time.Since(killedAt).Round(time.Second), transient)
	poll(t, 30*time.Second, fmt.Sprintf("the other %d nodes Ready with fresh leases", e2eNodes-e2eKilled), func() (bool, string) {
		live := checkNodes()
		return len(live) == 0, strings.Join(live, "; ")
	})
	// The killed ones stay as they are.
	for _, n := range nodesOf(t, admin, prefix) {
		if killed[n.Name] && nlc && nodeReady(&n) {
			t.Errorf("%s: killed, Ready again", n.Name)
		}
	}
	if !nlc {
		t.Log("NotReady not checked: NODEKIT_NODELIFECYCLE_CONTROLLER is not set (hack/kube-apiserver.sh build makes it); " +
			"without kube-controller-manager's node lifecycle controller nobody turns an expired lease into NotReady")
	}
	t.Log(h.rep.measure())
}

// startNodeLifecycleController runs the upstream node lifecycle controller
// (NODEKIT_NODELIFECYCLE_CONTROLLER, built by hack/kube-apiserver.sh) with
// a grace period scaled to the test, for this test only and only over the
// Nodes matching selector (the test's own): other tests leave Nodes behind
// whose agents stopped, and the controller must not taint them. It
// reports whether it runs.
func startNodeLifecycleController(t *testing.T, kubeconfig, selector string) bool {
	bin := os.Getenv("NODEKIT_NODELIFECYCLE_CONTROLLER")
	if bin == "" {
		return false
	}
	startProcess(t, "nodelifecycle-controller", bin, "--kubeconfig", kubeconfig, "--node-monitor-period", "1s",
		"--node-monitor-grace-period", e2eGrace.String(), "--node-startup-grace-period", "60s", "--taint-eviction=false",
		"--node-selector", selector)
	return true
}

// watchPods follows the test's pods (create and delete requests, first
// Running, last container state, gone) until the test ends.
func watchPods(t *testing.T, c kubernetes.Interface, ns string) *apiservertest.PodWatch {
	w := apiservertest.WatchPods(context.Background(), c, ns, clock.RealClock{})
	t.Cleanup(w.Stop)
	poll(t, 60*time.Second, "the pod watch synced", func() (bool, string) { return w.HasSynced(), "" })
	return w
}

// checkTermination: a pod that ignores SIGTERM went no sooner than its
// grace period after the delete request and ended killed (137); one that
// handles it ended with 0.
func checkTermination(t *testing.T, w *apiservertest.PodWatch, names []string) {
	t.Helper()
	var handled, ignored []time.Duration
	seen := 0
	for _, name := range names {
		var i, j int
		fmt.Sscanf(name, "p-%03d-%02d", &i, &j)
		asked, gone, term := w.Deletion(name)
		took := gone.Sub(asked)
		if j%2 == 0 {
			handled = append(handled, took)
			if term != nil && term.ExitCode != 0 {
				t.Errorf("pod %s handles SIGTERM but ended with %d (%s)", name, term.ExitCode, term.Reason)
			}
		} else {
			ignored = append(ignored, took)
			if took < e2eTermGrace*time.Second {
				t.Errorf("pod %s ignores SIGTERM but went %v after its deletion, before its %ds grace period", name, took, e2eTermGrace)
			}
			if term != nil && term.ExitCode != 137 {
				t.Errorf("pod %s ignores SIGTERM but ended with %d (%s), not killed (137)", name, term.ExitCode, term.Reason)
			}
		}
		if term != nil {
			seen++
		}
	}
	slices.Sort(handled)
	slices.Sort(ignored)
	t.Logf("deletion to gone: SIGTERM handled p50 %v p99 %v; ignored (grace %ds) p50 %v p99 %v; final container state seen for %d of %d",
		pct(handled, 50), pct(handled, 99), e2eTermGrace, pct(ignored, 50), pct(ignored, 99), seen, len(names))
	if seen < len(names)/2 {
		t.Errorf("the final container state was seen for only %d of %d pods", seen, len(names))
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[max(0, min(len(d)-1, i-1))].Round(time.Millisecond)
}

// parallel runs f for every name with 16 workers; errors fail the test.
func parallel(t *testing.T, names []string, f func(name string) error) {
	t.Helper()
	ch := make(chan string)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for k := 0; k < 16; k++ {
		wg.Go(func() {
			for name := range ch {
				if err := f(name); err != nil {
					mu.Lock()
					errs = append(errs, name+": "+err.Error())
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failed, first: %s", len(errs), errs[0])
	}
}

func leasesOf(t *testing.T, c kubernetes.Interface, prefix string) map[string]*coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases(v1.NamespaceNodeLease).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*coordinationv1.Lease{}
	for i := range l.Items {
		if strings.HasPrefix(l.Items[i].Name, prefix) {
			out[l.Items[i].Name] = &l.Items[i]
		}
	}
	return out
}

func nodesOf(t *testing.T, c kubernetes.Interface, prefix string) []v1.Node {
	t.Helper()
	l, err := c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Node
	for _, n := range l.Items {
		if strings.HasPrefix(n.Name, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// cleanupNodes deletes the test's Nodes and Leases.
func cleanupNodes(t *testing.T, c kubernetes.Interface, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	var names []string
	for _, n := range l.Items {
		if strings.HasPrefix(n.Name, prefix) {
			names = append(names, n.Name)
		}
	}
	var wg sync.WaitGroup
	ch := make(chan string)
	for k := 0; k < 16; k++ {
		wg.Go(func() {
			for name := range ch {
				_ = c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
				_ = c.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
			}
		})
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
}

// poll checks cond every 500ms until it holds, or fails the test after
// timeout with cond's last detail.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	expired := false
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if expired {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		}
		select {
		case <-deadline.C:
			expired = true
		case <-tick.C:
		}
	}
}

// testWriter sends the simulator's output lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
