//go:build e2e

package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/examples/internal/exutil"
)

// runLabel is the label every simulated node of one e2e test carries
// (value: the test's run ID). The control-plane processes a test starts
// (the node lifecycle controller, the scheduler through the pods'
// nodeSelector) are narrowed to it, so they never touch the Nodes and pods
// other e2e packages leave in the shared API server.
const runLabel = "simulate.nodekit.io/run"

// The scheduler test's scale and periods: 40 nodes, nodes renew their
// 10 s lease every 2 s, and the node lifecycle controller takes a node
// whose lease is 15 s old as gone.
const (
	schedNodes  = 40
	schedLease  = 10 * time.Second
	schedRenew  = 2 * time.Second
	schedGrace  = 15 * time.Second
	schedGroupK = "e2e.simulate.nodekit.io/group"
	schedPoolK  = "e2e.simulate.nodekit.io/pool"
	// schedTolerate is how long the pods of the nodes to be killed
	// tolerate the unreachable taint before the taint eviction controller
	// deletes them (the API server's default would be 300 s).
	schedTolerate = 2
)

// schedPodKind is what the scheduler test creates: name prefix, count, and
// what each pod asks for.
type schedPodKind struct {
	prefix   string
	count    int
	selector map[string]string
	tolerate []v1.Toleration
	cpu      string
}

// TestSchedulerAndEvictionAgainstAPIServer runs 40 simulated nodes with
// per-node labels, taints and capacity from --node-config against the real
// kube-apiserver, with the upstream kube-scheduler and node lifecycle
// controller (taint eviction on) running for the test's duration:
//
//   - pods without spec.nodeName are placed by the scheduler and become
//     Running with what a kubelet writes (nodeName, hostIP(s) = the node's
//     address, podIP(s) in the node's pod CIDR, phase, conditions,
//     container statuses), each on a node its nodeSelector matches; pods
//     that do not tolerate a group's NoSchedule taint never land there, and
//     stay Pending (PodScheduled=False, Unschedulable) when nothing else
//     matches; a group's CPU capacity admits two 400m pods per node and the
//     rest stay Pending (Insufficient cpu);
//   - killing 10 nodes makes them Unknown with the unreachable NoExecute
//     taint, and their pods get a deletionTimestamp and DisruptionTarget
//     from the taint eviction controller once their 2 s toleration runs
//     out, while the pods of the other 30 nodes are untouched;
//   - starting the killed nodes again (a reboot: a new boot ID, no pods)
//     makes them Ready, the controller removes their taints, and each
//     rebooted agent finalizes its evicted pods: they leave the API server.
func TestSchedulerAndEvictionAgainstAPIServer(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start an API server with `bash hack/kube-apiserver.sh start` and load its env")
	}
	adminKC := os.Getenv("NODEKIT_ADMIN_KUBECONFIG")
	ksBin, nlcBin := os.Getenv("NODEKIT_KUBE_SCHEDULER"), os.Getenv("NODEKIT_NODELIFECYCLE_CONTROLLER")
	if ksBin == "" || nlcBin == "" {
		msg := "NODEKIT_KUBE_SCHEDULER or NODEKIT_NODELIFECYCLE_CONTROLLER is not set: `hack/kube-apiserver.sh build` builds them, `start` sets them"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	restCfg, err := exutil.RestConfig(adminKC, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	start := time.Now()
	adminCfg := rest.CopyConfig(restCfg)
	adminCfg.QPS, adminCfg.Burst = 200, 400
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	runID := strconv.FormatInt(time.Now().UnixNano()/1e6%(36*36*36*36), 36)
	prefix := "sch-" + runID + "-"
	ns := "simulate-sched-" + runID
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The nodes: 00-09 group a, 10-19 group b (tainted), 20-21 group small
	// (1 CPU), 22-29 only the pool, 30-39 group e (to be killed).
	nodeConfig := t.TempDir() + "/nodes.yaml"
	conf := fmt.Sprintf(`nodes:
- match: "%[1]s*"
  labels: {%[2]s: main}
- match: "%[1]s0[0-9]"
  labels: {%[3]s: a}
- match: "%[1]s1[0-9]"
  labels: {%[3]s: b}
  taints: [{key: e2e.simulate.nodekit.io/dedicated, value: b, effect: NoSchedule}]
- match: "%[1]s2[01]"
  labels: {%[3]s: small}
  capacity: {cpu: "1"}
- match: "%[1]s3[0-9]"
  labels: {%[3]s: e, %[2]s: evict}
`, prefix, schedPoolK, schedGroupK)
	if err := os.WriteFile(nodeConfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	group := func(i int) string {
		switch {
		case i < 10:
			return "a"
		case i < 20:
			return "b"
		case i < 22:
			return "small"
		case i < 30:
			return ""
		}
		return "e"
	}

	// A Node of "another test", NotReady with a Ready pod, as the
	// graceful-shutdown test leaves nodekit-e2e: the controllers must
	// never touch it (checked after the eviction below).
	foreign := newForeignNode(t, admin, "schx-"+runID+"-foreign", ns)
	// testPods: the test's own pods.
	testPods := func() map[string]*v1.Pod {
		m := podsOf(t, admin, ns)
		delete(m, "foreign")
		return m
	}

	// The control plane, for this test only and only for its nodes.
	selector := runLabel + "=" + runID
	startProcess(t, "nodelifecycle-controller", nlcBin, "--kubeconfig", adminKC, "--node-monitor-period", "1s",
		"--node-monitor-grace-period", schedGrace.String(), "--node-startup-grace-period", "60s",
		"--node-eviction-rate", "100", "--taint-eviction=true", "--node-selector", selector,
		"--kube-api-qps", "100", "--kube-api-burst", "200")
	ksConfig := t.TempDir() + "/kube-scheduler.yaml"
	if err := os.WriteFile(ksConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 100, burst: 200}
leaderElection: {leaderElect: false}
`, adminKC)), 0o600); err != nil {
		t.Fatal(err)
	}
	// --secure-port 0: no HTTPS endpoint (no port to collide on).
	startProcess(t, "kube-scheduler", ksBin, "--config", ksConfig, "--secure-port", "0")

	o := options{
		nodes: schedNodes, namePattern: prefix + "%02d", nodeConfig: nodeConfig, labels: selector,
		cpu: "4", memory: "16Gi", storage: "100Gi", pods: 110,
		images: "busybox", leaseDuration: schedLease, leaseRenew: schedRenew, statusUpdate: 5 * time.Second,
		statusReport: time.Minute, qps: 200, burst: 400, nodeQPS: 10, nodeBurst: 20, startRate: 100,
		events: false, report: 10 * time.Second, root: t.TempDir(),
	}
	up := make(chan *simulator, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	cl, err := newAPIClients(restCfg, float32(o.qps), o.burst, float32(o.nodeQPS), o.nodeBurst)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- run(runCtx, o, cl, nil, testWriter{t}, func(s *simulator, _ *reporter, _ net.Addr) { up <- s })
	}()
	t.Cleanup(func() {
		// Force: pods still Pending or on killed nodes have no agent to
		// finalize them, and no namespace controller runs.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		_ = admin.CoreV1().Pods(ns).DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		stop()
		if err := <-done; err != nil {
			t.Errorf("simulator: %v", err)
		}
		cleanupNodes(t, admin, prefix)
		_ = admin.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{})
	})
	var sim *simulator
	select {
	case sim = <-up:
	case err := <-done:
		t.Fatalf("simulator stopped: %v", err)
	}
	nodeIndex := func(name string) int {
		i, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil || !strings.HasPrefix(name, prefix) {
			return -1
		}
		return i
	}

	// 1. Every node is Ready, with its labels, taints and capacity, and
	// without the not-ready taint the controller puts on a new node.
	poll(t, 90*time.Second, fmt.Sprintf("%d nodes Ready and schedulable", schedNodes), func() (bool, string) {
		var wrong []string
		nodes := nodesOf(t, admin, prefix)
		for i := range nodes {
			n := &nodes[i]
			if !nodeReady(n) || hasTaint(n, v1.TaintNodeNotReady) || hasTaint(n, v1.TaintNodeUnreachable) {
				wrong = append(wrong, n.Name)
			}
		}
		return len(nodes) == schedNodes && len(wrong) == 0, fmt.Sprintf("%d nodes, not yet: %s", len(nodes), abbreviate(wrong))
	})
	for _, n := range nodesOf(t, admin, prefix) {
		i := nodeIndex(n.Name)
		g := group(i)
		if n.Labels[runLabel] != runID || n.Labels[schedGroupK] != g && g != "" {
			t.Errorf("node %s: labels %v, want %s=%s and %s=%s", n.Name, n.Labels, runLabel, runID, schedGroupK, g)
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(tt v1.Taint) bool {
			return tt.Key == "e2e.simulate.nodekit.io/dedicated" && tt.Value == "b" && tt.Effect == v1.TaintEffectNoSchedule
		})
		if tainted != (g == "b") {
			t.Errorf("node %s (group %q): taints %v", n.Name, g, n.Spec.Taints)
		}
		wantCPU := "4"
		if g == "small" {
			wantCPU = "1"
		}
		if c := n.Status.Allocatable[v1.ResourceCPU]; c.Cmp(resource.MustParse(wantCPU)) != 0 {
			t.Errorf("node %s: allocatable cpu %s, want %s", n.Name, c.String(), wantCPU)
		}
	}
	t.Logf("%v: %d nodes Ready", time.Since(start).Round(time.Second), schedNodes)

	// 2. Pods without spec.nodeName, placed by the scheduler.
	tolerateB := []v1.Toleration{{Key: "e2e.simulate.nodekit.io/dedicated", Operator: v1.TolerationOpEqual, Value: "b", Effect: v1.TaintEffectNoSchedule}}
	secs := int64(schedTolerate)
	tolerateGone := []v1.Toleration{
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
	}
	kinds := []schedPodKind{
		{prefix: "a", count: 20, selector: map[string]string{schedGroupK: "a"}},
		{prefix: "plain", count: 30, selector: map[string]string{schedPoolK: "main"}},
		{prefix: "btol", count: 10, selector: map[string]string{schedGroupK: "b"}, tolerate: tolerateB},
		{prefix: "b", count: 3, selector: map[string]string{schedGroupK: "b"}},
		{prefix: "small", count: 6, selector: map[string]string{schedGroupK: "small"}, cpu: "400m"},
		{prefix: "e", count: 30, selector: map[string]string{schedGroupK: "e"}, tolerate: tolerateGone},
	}
	var names []string
	kindOf := map[string]schedPodKind{}
	for _, k := range kinds {
		for j := 0; j < k.count; j++ {
			name := fmt.Sprintf("%s-%02d", k.prefix, j)
			names = append(names, name)
			kindOf[name] = k
		}
	}
	created := time.Now()
	parallel(t, names, func(name string) error {
		k := kindOf[name]
		grace := int64(5)
		no := false
		c := v1.Container{Name: "c", Image: "busybox"}
		if k.cpu != "" {
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(k.cpu)}
		}
		_, err := admin.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{
				NodeSelector: k.selector, Tolerations: k.tolerate,
				TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: &no,
				Containers: []v1.Container{c},
			},
		}, metav1.CreateOptions{})
		return err
	})
	// Expected: every pod Running but the 3 untolerating b pods and 2 of
	// the 6 small ones (1 CPU holds two 400m pods).
	const wantPending = 3 + 2
	wantRunning := len(names) - wantPending
	var pods map[string]*v1.Pod
	poll(t, 120*time.Second, fmt.Sprintf("%d pods Running, %d Unschedulable", wantRunning, wantPending), func() (bool, string) {
		pods = testPods()
		running, unsched := 0, 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning && podReady(p) {
				running++
			}
			if c := podCondition(p, v1.PodScheduled); c != nil && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				unsched++
			}
		}
		return running == wantRunning && unsched == wantPending, fmt.Sprintf("%d Running and Ready, %d Unschedulable", running, unsched)
	})
	t.Logf("%v: %d pods placed by kube-scheduler and Running in %v; %d Unschedulable",
		time.Since(start).Round(time.Second), wantRunning, time.Since(created).Round(time.Millisecond), wantPending)

	// What a kubelet writes, field by field, and where the scheduler put
	// them.
	nodes := map[string]*v1.Node{}
	for _, n := range nodesOf(t, admin, prefix) {
		nodes[n.Name] = &n
	}
	perNode := map[string]int{} // 400m pods per node
	smallRunning := 0
	for _, name := range names {
		p, k := pods[name], kindOf[name]
		if p == nil {
			t.Errorf("pod %s: gone", name)
			continue
		}
		if k.prefix == "b" || (k.prefix == "small" && p.Spec.NodeName == "") {
			checkUnschedulable(t, p, map[string]string{"b": "untolerated taint", "small": "Insufficient cpu"}[k.prefix])
			continue
		}
		n := nodes[p.Spec.NodeName]
		if n == nil {
			t.Errorf("pod %s: on node %q, not one of the test's", name, p.Spec.NodeName)
			continue
		}
		i := nodeIndex(n.Name)
		for key, want := range k.selector {
			if n.Labels[key] != want {
				t.Errorf("pod %s (nodeSelector %v): on %s with labels %v", name, k.selector, n.Name, n.Labels)
			}
		}
		if group(i) == "b" && k.tolerate == nil {
			t.Errorf("pod %s does not tolerate group b's taint but is on %s", name, n.Name)
		}
		if k.prefix == "small" {
			perNode[n.Name]++
			smallRunning++
		}
		checkKubeletStatus(t, p, n, i)
	}
	for name, k := range perNode {
		if group(nodeIndex(name)) == "small" && k > 2 {
			t.Errorf("node %s (1 CPU) runs %d pods of 400m", name, k)
		}
	}
	if smallRunning != 4 {
		t.Errorf("%d of the 400m pods run on the two 1-CPU nodes, want 4", smallRunning)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 3. Kill the 10 group-e nodes: the node lifecycle controller marks
	// them Unknown and taints them unreachable:NoExecute; the taint
	// eviction controller deletes their pods after their 2 s toleration.
	isKilled := func(node string) bool { return group(nodeIndex(node)) == "e" }
	bootIDs := map[string]string{}
	for name, n := range nodes {
		bootIDs[name] = n.Status.NodeInfo.BootID
	}
	if got, err := sim.act("kill", prefix+"3[0-9]"); err != nil || len(got) != 10 {
		t.Fatalf("kill = %v, %v", got, err)
	}
	killedAt := time.Now()
	var tainted, evicted time.Duration
	poll(t, 120*time.Second, "the killed nodes Unknown and tainted, their pods evicted", func() (bool, string) {
		var waiting []string
		for _, n := range nodesOf(t, admin, prefix) {
			if !isKilled(n.Name) {
				continue
			}
			if c := nodeCondition(&n, v1.NodeReady); c == nil || c.Status != v1.ConditionUnknown {
				waiting = append(waiting, n.Name+": not Unknown")
			} else if !hasNoExecute(&n, v1.TaintNodeUnreachable) {
				waiting = append(waiting, n.Name+": no unreachable:NoExecute taint")
			}
		}
		if len(waiting) == 0 && tainted == 0 {
			tainted = time.Since(killedAt)
		}
		for _, p := range testPods() {
			if isKilled(p.Spec.NodeName) && p.DeletionTimestamp == nil {
				waiting = append(waiting, p.Name+": not evicted")
			}
		}
		slices.Sort(waiting)
		return len(waiting) == 0, abbreviate(waiting)
	})
	evicted = time.Since(killedAt)
	t.Logf("%v: killed nodes Unknown and tainted %v after the kill, their pods evicted after %v",
		time.Since(start).Round(time.Second), tainted.Round(time.Second), evicted.Round(time.Second))
	pods = testPods()
	evictedPods := 0
	for _, name := range names {
		p := pods[name]
		if p == nil {
			t.Errorf("pod %s: gone while its node is down (nobody may finalize it)", name)
			continue
		}
		if isKilled(p.Spec.NodeName) {
			evictedPods++
			c := podCondition(p, v1.DisruptionTarget)
			if c == nil || c.Status != v1.ConditionTrue || c.Reason != "DeletionByTaintManager" {
				t.Errorf("pod %s (evicted): DisruptionTarget condition %+v, want True DeletionByTaintManager", name, c)
			}
			continue
		}
		if p.DeletionTimestamp != nil || podCondition(p, v1.DisruptionTarget) != nil {
			t.Errorf("pod %s on live node %q: deletionTimestamp %v, conditions %+v", name, p.Spec.NodeName, p.DeletionTimestamp, p.Status.Conditions)
		}
		if p.Spec.NodeName != "" && (p.Status.Phase != v1.PodRunning || !podReady(p)) {
			t.Errorf("pod %s on live node %s: phase %s, Ready %v", name, p.Spec.NodeName, p.Status.Phase, podReady(p))
		}
	}
	if evictedPods != 30 {
		t.Errorf("%d pods evicted, want the 30 of group e", evictedPods)
	}
	for _, n := range nodesOf(t, admin, prefix) {
		if !isKilled(n.Name) && (!nodeReady(&n) || hasTaint(&n, v1.TaintNodeUnreachable) || hasTaint(&n, v1.TaintNodeNotReady)) {
			t.Errorf("live node %s: Ready %v, taints %v", n.Name, nodeReady(&n), n.Spec.Taints)
		}
	}
	foreign.check(t)
	if t.Failed() {
		t.FailNow()
	}

	// 4. Start the killed nodes again: a reboot (new boot ID, no pods).
	// They go Ready, the controller removes their taints, and each agent
	// finalizes the pods evicted while it was down.
	if got, err := sim.act("start", prefix+"3[0-9]"); err != nil || len(got) != 10 {
		t.Fatalf("start = %v, %v", got, err)
	}
	restarted := time.Now()
	poll(t, 90*time.Second, "the rebooted nodes Ready, untainted, their evicted pods gone", func() (bool, string) {
		var waiting []string
		for _, n := range nodesOf(t, admin, prefix) {
			if !isKilled(n.Name) {
				continue
			}
			switch {
			case !nodeReady(&n):
				waiting = append(waiting, n.Name+": not Ready")
			case hasTaint(&n, v1.TaintNodeUnreachable) || hasTaint(&n, v1.TaintNodeNotReady):
				waiting = append(waiting, n.Name+": still tainted")
			}
		}
		for _, p := range testPods() {
			if isKilled(p.Spec.NodeName) {
				waiting = append(waiting, p.Name+": still in the API server")
			}
		}
		slices.Sort(waiting)
		return len(waiting) == 0, abbreviate(waiting)
	})
	t.Logf("%v: rebooted nodes Ready and untainted, evicted pods finalized, %v after the start",
		time.Since(start).Round(time.Second), time.Since(restarted).Round(time.Second))
	for _, n := range nodesOf(t, admin, prefix) {
		if isKilled(n.Name) && n.Status.NodeInfo.BootID == bootIDs[n.Name] {
			t.Errorf("node %s: boot ID %s unchanged by the reboot", n.Name, n.Status.NodeInfo.BootID)
		}
	}
	// The other pods ran on through all of it.
	pods = testPods()
	if len(pods) != len(names)-30 {
		t.Errorf("%d pods left, want %d", len(pods), len(names)-30)
	}
	for name, p := range pods {
		if p.Spec.NodeName == "" {
			checkUnschedulable(t, p, "")
			continue
		}
		if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodRunning || !podReady(p) {
			t.Errorf("pod %s on %s: deletionTimestamp %v, phase %s, Ready %v", name, p.Spec.NodeName, p.DeletionTimestamp, p.Status.Phase, podReady(p))
		}
	}
}

// foreignNode is a Node outside the test's label, NotReady since before
// the controllers started, with a pod bound to it whose status says
// Running and Ready.
type foreignNode struct {
	c         kubernetes.Interface
	node, ns  string
	heartbeat metav1.Time
	// taints: as created (the API server's TaintNodesByCondition
	// admission gives every new Node not-ready:NoSchedule).
	taints []v1.Taint
}

func newForeignNode(t *testing.T, c kubernetes.Interface, name, ns string) *foreignNode {
	t.Helper()
	ctx := t.Context()
	n, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// An old heartbeat: an unfiltered controller would also turn it Unknown.
	hb := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "node is shutting down", LastHeartbeatTime: hb, LastTransitionTime: hb}}
	if n, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	p, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign"},
		Spec: v1.PodSpec{NodeName: name, AutomountServiceAccountToken: &no,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: hb}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &foreignNode{c: c, node: name, ns: ns, heartbeat: hb, taints: n.Spec.Taints}
}

// check: the foreign Node has the taints it was created with and its Ready
// condition as set; its pod is neither marked NotReady nor evicted.
func (f *foreignNode) check(t *testing.T) {
	t.Helper()
	n, err := f.c.CoreV1().Nodes().Get(t.Context(), f.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := nodeCondition(n, v1.NodeReady); !apiequality.Semantic.DeepEqual(n.Spec.Taints, f.taints) || c == nil || c.Status != v1.ConditionFalse || !c.LastHeartbeatTime.Equal(&f.heartbeat) {
		t.Errorf("another test's Node %s was touched: taints %v, Ready %+v", f.node, n.Spec.Taints, c)
	}
	p, err := f.c.CoreV1().Pods(f.ns).Get(t.Context(), "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.DeletionTimestamp != nil || !podReady(p) || podCondition(p, v1.DisruptionTarget) != nil {
		t.Errorf("another test's pod on %s was touched: deletionTimestamp %v, conditions %+v", f.node, p.DeletionTimestamp, p.Status.Conditions)
	}
}

// checkKubeletStatus checks what the agent of node n (index i) wrote for
// the Running pod p, field by field, as a kubelet writes it.
func checkKubeletStatus(t *testing.T, p *v1.Pod, n *v1.Node, i int) {
	t.Helper()
	s := p.Status
	bad := func(format string, args ...any) {
		t.Errorf("pod %s on %s: "+format, append([]any{p.Name, n.Name}, args...)...)
	}
	var nodeAddr string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			nodeAddr = a.Address
		}
	}
	if nodeAddr != nodeIP(i).String() {
		bad("node InternalIP %q, want %s", nodeAddr, nodeIP(i))
	}
	if s.Phase != v1.PodRunning {
		bad("phase %s", s.Phase)
	}
	if s.HostIP != nodeAddr || len(s.HostIPs) != 1 || s.HostIPs[0].IP != nodeAddr {
		bad("hostIP %q, hostIPs %v, want the node's address %s", s.HostIP, s.HostIPs, nodeAddr)
	}
	cidr := netip.MustParsePrefix(podCIDR(i))
	ip, err := netip.ParseAddr(s.PodIP)
	if err != nil || !cidr.Contains(ip) || ip == cidr.Addr() {
		bad("podIP %q, not a pod address in the node's pod CIDR %s", s.PodIP, cidr)
	}
	if len(s.PodIPs) != 1 || s.PodIPs[0].IP != s.PodIP {
		bad("podIPs %v, want [%s]", s.PodIPs, s.PodIP)
	}
	// (creationTimestamp is in whole seconds.)
	if s.StartTime == nil || s.StartTime.Before(&p.CreationTimestamp) {
		bad("startTime %v, created %v", s.StartTime, p.CreationTimestamp)
	}
	for _, ct := range []v1.PodConditionType{v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		c := podCondition(p, ct)
		if c == nil || c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
			bad("condition %s: %+v, want True with a transition time", ct, c)
		}
	}
	if len(s.ContainerStatuses) != 1 {
		bad("%d container statuses, want 1", len(s.ContainerStatuses))
		return
	}
	cs := s.ContainerStatuses[0]
	switch {
	case cs.Name != "c":
		bad("container status of %q, want c", cs.Name)
	case !cs.Ready || cs.Started == nil || !*cs.Started:
		bad("container c: ready %v, started %v", cs.Ready, cs.Started)
	case cs.State.Running == nil || cs.State.Running.StartedAt.IsZero():
		bad("container c: state %+v, want running with a start time", cs.State)
	case cs.RestartCount != 0 || cs.LastTerminationState.Terminated != nil:
		bad("container c: %d restarts, last state %+v", cs.RestartCount, cs.LastTerminationState)
	case cs.Image != "docker.io/library/busybox:latest" || !strings.HasPrefix(cs.ImageID, "sha256:"):
		bad("container c: image %q, imageID %q", cs.Image, cs.ImageID)
	case !strings.Contains(cs.ContainerID, "://"):
		bad("container c: containerID %q, want <runtime>://<id>", cs.ContainerID)
	}
}

// checkUnschedulable: p is Pending, bound to no node, with the scheduler's
// PodScheduled=False/Unschedulable condition whose message says why.
func checkUnschedulable(t *testing.T, p *v1.Pod, why string) {
	t.Helper()
	c := podCondition(p, v1.PodScheduled)
	switch {
	case p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending:
		t.Errorf("pod %s: on %q, phase %s; want Pending on no node", p.Name, p.Spec.NodeName, p.Status.Phase)
	case c == nil || c.Status != v1.ConditionFalse || c.Reason != v1.PodReasonUnschedulable:
		t.Errorf("pod %s: PodScheduled %+v, want False Unschedulable", p.Name, c)
	case !strings.Contains(c.Message, why):
		t.Errorf("pod %s: Unschedulable %q, want the reason %q", p.Name, c.Message, why)
	}
}

// startProcess runs a control-plane binary for the test's duration, its
// output in a file whose last lines are logged if the test fails.
func startProcess(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// Dies with the test binary: a test killed by -timeout skips its
	// cleanups, and the controller must not outlive it in the shared API
	// server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logName := t.TempDir() + "/" + name + ".log"
	logf, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logName); err == nil {
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				t.Logf("%s: last lines of its log:\n%s", name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
}

func podsOf(t *testing.T, c kubernetes.Interface, ns string) map[string]*v1.Pod {
	t.Helper()
	l, err := c.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*v1.Pod, len(l.Items))
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

func podCondition(p *v1.Pod, ct v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *v1.Pod) bool {
	c := podCondition(p, v1.PodReady)
	return c != nil && c.Status == v1.ConditionTrue
}

func nodeCondition(n *v1.Node, ct v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

func hasNoExecute(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key && t.Effect == v1.TaintEffectNoExecute })
}
