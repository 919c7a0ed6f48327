package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	kfake "github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/prober"
)

// fakeClients serves every node from one fake clientset.
type fakeClients struct{ c *fake.Clientset }

func (f fakeClients) Shared() kubernetes.Interface           { return f.c }
func (f fakeClients) ForNode() (kubernetes.Interface, error) { return f.c, nil }
func (f fakeClients) Events() kubernetes.Interface           { return nil }
func (f fakeClients) Requests() int64                        { return int64(len(f.c.Actions())) }

// waitFor polls cond every 20ms until it holds or fails after 30s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		}
		<-tick.C
	}
}

// syncBuffer is an io.Writer safe for the simulator's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testOptions(t *testing.T) options {
	var o options
	fs := flagSet(&o)
	if err := fs.Parse([]string{"--nodes", "3", "--name-pattern", "u-%d", "--lease-duration", "5s",
		"--lease-renew", "100ms", "--status-update", "100ms", "--report", "50ms", "--events=false",
		"--root", t.TempDir(), "--labels", "pool=sim", "--taints", "sim=yes:NoSchedule", "--pods", "20"}); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestSimulatorOnFakeAPI runs three simulated nodes against a fake
// clientset: they register with their capacity, labels and taints and go
// Ready; a pod bound to one runs; through the control API a stopped node
// comes back with its pod's container as it was (the runtime kept), a
// killed one with a new boot ID and the pod's container started anew.
func TestSimulatorOnFakeAPI(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	out := &syncBuffer{}
	type handle struct {
		sim  *simulator
		rep  *reporter
		addr net.Addr
	}
	up := make(chan handle, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, testOptions(t), fakeClients{client}, nil, out, func(s *simulator, r *reporter, a net.Addr) { up <- handle{s, r, a} })
	}()
	var h handle
	select {
	case h = <-up:
	case err := <-done:
		t.Fatalf("run = %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v", err)
		}
		if !strings.Contains(out.String(), "nodes 3/3 Ready") {
			t.Errorf("no report line with 3 nodes Ready in the output:\n%s", out.String())
		}
	}()
	waitFor(t, "3 nodes Ready", func() (bool, string) {
		r := h.rep.measure()
		return r.NodesReady == 3, r.String()
	})
	node, err := client.CoreV1().Nodes().Get(ctx, "u-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := node.Status.Capacity[v1.ResourcePods]; q.Value() != 20 || node.Labels["pool"] != "sim" ||
		len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "sim" || node.Status.Addresses[0].Address != "127.64.0.1" {
		t.Fatalf("node u-1: pods %v labels %v taints %v addresses %v", q.String(), node.Labels, node.Spec.Taints, node.Status.Addresses)
	}
	bootID := node.Status.NodeInfo.BootID

	pods := client.CoreV1().Pods("default")
	for _, n := range []string{"u-1", "u-2"} {
		if _, err := pods.Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + n, Namespace: "default", UID: types.UID("uid-" + n)},
			Spec:       v1.PodSpec{NodeName: n, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	containerID := func(name string) (string, string) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return "", fmt.Sprint(err, p.Status)
		}
		return p.Status.ContainerStatuses[0].ContainerID, ""
	}
	var first = map[string]string{}
	for _, n := range []string{"u-1", "u-2"} {
		waitFor(t, "pod on "+n+" Running", func() (bool, string) {
			id, detail := containerID("p-" + n)
			first[n] = id
			return id != "", detail
		})
	}

	for _, n := range []string{"u-0", "u-1"} {
		waitFor(t, n+"'s lease", func() (bool, string) {
			_, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	post := func(path string) (int, string) {
		resp, err := http.Post("http://"+h.addr.String()+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/nodes/u-1/kill"); code != 200 || !strings.Contains(body, "u-1") {
		t.Fatalf("kill: %d %s", code, body)
	}
	if code, body := post("/nodes/u-2/stop"); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	resp, err := http.Get("http://" + h.addr.String() + "/nodes")
	if err != nil {
		t.Fatal(err)
	}
	var states []nodeState
	err = json.NewDecoder(resp.Body).Decode(&states)
	resp.Body.Close()
	if err != nil || len(states) != 3 || states[0].State != stateRunning || states[1].State != stateKilled || states[2].State != stateStopped {
		t.Fatalf("GET /nodes = %+v, %v", states, err)
	}
	if r := h.rep.measure(); r.AgentsRunning != 1 {
		t.Fatalf("agents running after kill and stop: %d", r.AgentsRunning)
	}
	// A killed node's lease is not renewed.
	lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "u-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "u-0", metav1.GetOptions{})
	waitFor(t, "u-0's lease renewed", func() (bool, string) {
		l, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "u-0", metav1.GetOptions{})
		return l.Spec.RenewTime.After(other.Spec.RenewTime.Time), ""
	})
	if l, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "u-1", metav1.GetOptions{}); !l.Spec.RenewTime.Equal(lease.Spec.RenewTime) {
		t.Fatalf("the killed node's lease was renewed: %v then %v", lease.Spec.RenewTime, l.Spec.RenewTime)
	}
	for _, bad := range []string{"/nodes/nomatch/kill", "/nodes/u-1/explode"} {
		if code, body := post(bad); code != http.StatusBadRequest {
			t.Errorf("POST %s = %d %s, want 400", bad, code, body)
		}
	}
	if code, body := post("/nodes/u-[12]/start"); code != 200 || !strings.Contains(body, "u-2") {
		t.Fatalf("start: %d %s", code, body)
	}
	// The stopped node kept its runtime: the same container runs. The
	// killed one rebooted: a new boot ID and a new container.
	waitFor(t, "u-1 with a new boot ID", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, "u-1", metav1.GetOptions{})
		return err == nil && n.Status.NodeInfo.BootID != bootID, fmt.Sprint(err)
	})
	waitFor(t, "the pod on u-1 in a new container", func() (bool, string) {
		id, detail := containerID("p-u-1")
		return id != "" && id != first["u-1"], detail + " " + id
	})
	if id, detail := containerID("p-u-2"); id != first["u-2"] {
		t.Fatalf("the pod on the stopped and started u-2: container %q (%s), want %q", id, detail, first["u-2"])
	}
	if code, body := post("/nodes/u-2/start"); code != 200 || !strings.Contains(body, "running") {
		t.Fatalf("starting a running node: %d %s (want an error in a 200: the node was matched)", code, body)
	}
	// restart stops and starts a running node, and starts a stopped one.
	if code, body := post("/nodes/u-0/stop"); code != 200 {
		t.Fatalf("stop u-0: %d %s", code, body)
	}
	if code, body := post("/nodes/u-[02]/restart"); code != 200 || strings.Contains(body, "error") {
		t.Fatalf("restart: %d %s", code, body)
	}
	want := map[string]int{"u-0": 2, "u-1": 2, "u-2": 3}
	for _, st := range h.sim.states() {
		if st.State != stateRunning || st.Starts != want[st.Name] {
			t.Errorf("after restart: %+v, want running with %d starts", st, want[st.Name])
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes"},
		{[]string{"--name-pattern", "sim"}, "--name-pattern"},
		{[]string{"--name-pattern", "Sim-%d"}, "not a valid node name"},
		{[]string{"--cpu", "-1"}, "cpu"},
		{[]string{"--memory", "lots"}, "memory"},
		{[]string{"--pods", "0"}, "--pods"},
		{[]string{"--labels", "novalue"}, "--labels"},
		{[]string{"--taints", "k=v:Sometimes"}, "effect"},
		{[]string{"--lease-duration", "1500ms"}, "--lease-duration"},
		{[]string{"--lease-renew", "50s"}, "--lease-renew"},
		{[]string{"--status-update", "0s"}, "--status-update"},
		{[]string{"--qps", "-1"}, "--qps"},
		{[]string{"--event-qps", "-5"}, "--event-qps"},
		{[]string{"--nodes", "20000"}, "at most"},
		{[]string{"--node-config", "/nonexistent"}, "nonexistent"},
	} {
		var o options
		if err := flagSet(&o).Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if _, err := o.simConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

func TestNodeConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(file, []byte(`nodes:
- match: "n-*"
  capacity: {cpu: "8", memory: 32Gi}
  labels: {zone: a}
- match: "n-[0-1]"
  capacity: {pods: "30"}
  labels: {gpu: "yes"}
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var o options
	if err := flagSet(&o).Parse([]string{"--nodes", "3", "--name-pattern", "n-%d", "--node-config", file, "--labels", "pool=x"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.simConfig()
	if err != nil {
		t.Fatal(err)
	}
	s0, s2 := cfg.Specs("n-0"), cfg.Specs("n-2")
	if s0.CPU.String() != "8" || s0.Memory.String() != "32Gi" || s0.Pods != 30 || s0.Labels["zone"] != "a" ||
		s0.Labels["gpu"] != "yes" || s0.Labels["pool"] != "x" || len(s0.Taints) != 1 {
		t.Errorf("n-0: %+v", s0)
	}
	if s2.CPU.String() != "8" || s2.Pods != 110 || s2.Labels["gpu"] != "" || s2.Labels["zone"] != "a" || len(s2.Taints) != 0 {
		t.Errorf("n-2: %+v", s2)
	}
	for name, body := range map[string]string{
		"unknown-field":  "nodes: [{match: x, color: red}]",
		"bad-capacity":   "nodes: [{match: x, capacity: {cpu: lots}}]",
		"bad-resource":   "nodes: [{match: x, capacity: {gpus: '1'}}]",
		"bad-glob":       "nodes: [{match: '['}]",
		"bad-taint":      "nodes: [{match: x, taints: [{key: k, effect: Maybe}]}]",
		"fractional-pod": "nodes: [{match: x, capacity: {pods: 1500m}}]",
	} {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readSpecFile(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNodeNamesAndAddresses(t *testing.T) {
	names, err := nodeNames("sim-%04d", 3, 998)
	if err != nil || strings.Join(names, ",") != "sim-0998,sim-0999,sim-1000" {
		t.Fatalf("nodeNames = %v, %v", names, err)
	}
	if _, err := nodeNames("sim-%01d", 11, 5); err != nil {
		t.Fatalf("nodeNames: %v", err)
	}
	if got := nodeIP(70000).String(); got != "127.65.17.112" {
		t.Errorf("nodeIP(70000) = %s", got)
	}
	if got := podCIDR(300); got != "10.65.44.0/24" {
		t.Errorf("podCIDR(300) = %s", got)
	}
}

func TestProbeRules(t *testing.T) {
	for _, tc := range []struct {
		rule string
		age  time.Duration
		want prober.Result
	}{
		{"success", 0, prober.Success},
		{"failure", 0, prober.Failure},
		{"failure-after=10s", 5 * time.Second, prober.Success},
		{"failure-after=10s", 10 * time.Second, prober.Failure},
		{"success-after=3s", time.Second, prober.Failure},
		{"success-after=3s", 4 * time.Second, prober.Success},
		{"failure-after=soon", time.Hour, prober.Failure},
		{"maybe", 0, prober.Failure},
	} {
		if got, _, _ := probeRule(tc.rule, tc.age); got != tc.want {
			t.Errorf("%q at %v = %v, want %v", tc.rule, tc.age, got, tc.want)
		}
	}
}

// TestSimProbesFindPodByIP: the answer is the annotation of the sandbox
// with the probed IP, for the probed port.
func TestSimProbesFindPodByIP(t *testing.T) {
	ctx := t.Context()
	rt, err := kfake.New(kfake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string, ann map[string]string) string {
		id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name},
			Annotations: ann,
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		st, err := rt.PodSandboxStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return st.GetStatus().GetNetwork().GetIp()
	}
	failing := mk("a", map[string]string{ProbeAnnotationPrefix + "8080": "failure"})
	healthy := mk("b", map[string]string{ProbeAnnotationPrefix + "9090": "failure"})
	p := &simProbes{rt: rt, clock: clock.RealClock{}}
	if r, _, _ := p.ProbeTCP(ctx, failing, 8080, time.Second); r != prober.Failure {
		t.Errorf("pod a port 8080 = %v, want failure", r)
	}
	if r, _, _ := p.ProbeGRPC(ctx, failing, 9090, "", time.Second); r != prober.Success {
		t.Errorf("pod a port 9090 = %v, want success", r)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+healthy+":9090/healthz", nil)
	if r, _, _ := p.ProbeHTTP(ctx, req, time.Second); r != prober.Failure {
		t.Errorf("pod b port 9090 = %v, want failure", r)
	}
}

// TestFakeStatsFollowRuntime: memory in use is what the simulated
// processes use.
func TestFakeStatsFollowRuntime(t *testing.T) {
	ctx := t.Context()
	rt, err := kfake.New(kfake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "big", Namespace: "ns", Uid: "uid-big"},
		Annotations: map[string]string{kfake.BehaviorAnnotation("c"): "memory=1Gi"},
	}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image: &runtimeapi.ImageSpec{Image: "busybox"}}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	s, err := (&fakeStats{rt: rt, memory: 4 << 30, storage: 10 << 30}).Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Memory.WorkingSetBytes != 1<<30 || s.Memory.AvailableBytes != 3<<30 || len(s.Pods) != 1 ||
		s.Pods[0].UID != "uid-big" || s.Pods[0].MemoryWorkingSetBytes != 1<<30 || s.Pods[0].Containers[0].Name != "c" {
		t.Fatalf("summary: memory %+v pods %+v", s.Memory, s.Pods)
	}
}

func TestBothLimiters(t *testing.T) {
	// Overall burst 3, each node burst 2, nothing refilled within the test.
	c := &apiClients{global: flowcontrol.NewTokenBucketRateLimiter(0.001, 3), nodeQPS: 0.001, burst: 2}
	a := c.limiter(flowcontrol.NewTokenBucketRateLimiter(0.001, 2))
	b := c.limiter(flowcontrol.NewTokenBucketRateLimiter(0.001, 2))
	got := []bool{a.TryAccept(), a.TryAccept(), a.TryAccept(), b.TryAccept(), b.TryAccept()}
	// a: its own two; b: the one overall token left.
	if want := []bool{true, true, false, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("TryAccept = %v, want %v", got, want)
	}
	if (&apiClients{}).limiter(nil).TryAccept() != true {
		t.Fatal("no limits: refused")
	}
}

// TestNodeClientLimits: a node's pod requests pass its own limit; its
// Lease and Node requests (the heartbeat) do not wait for it; every
// request is counted.
func TestNodeClientLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/leases/"):
			fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"n"}}`)
		case strings.Contains(r.URL.Path, "/nodes/"):
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`)
		default:
			fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`)
		}
	}))
	defer srv.Close()
	// One request per node at once, then one per 1000 s.
	c, err := newAPIClients(&rest.Config{Host: srv.URL}, 0, 0, 0.001, 1)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := c.ForNode()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := nc.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatalf("first pod request: %v", err)
	}
	if _, err := nc.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err == nil {
		t.Fatal("second pod request within the node's limit passed")
	}
	for i := 0; i < 3; i++ {
		if _, err := nc.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatalf("lease request %d: %v", i, err)
		}
		if _, err := nc.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatalf("node request %d: %v", i, err)
		}
	}
	if got := c.Requests(); got != 7 {
		t.Fatalf("Requests = %d, want 7 (the refused one was never sent)", got)
	}
}

// TestEventsClientLimit: with limitEvents every node's events share one
// limit of their own, and pod requests do not wait for it; without it
// the nodes write events with their own clients.
func TestEventsClientLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/events") {
			fmt.Fprint(w, `{"kind":"Event","apiVersion":"v1","metadata":{"name":"e"}}`)
			return
		}
		fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`)
	}))
	defer srv.Close()
	c, err := newAPIClients(&rest.Config{Host: srv.URL}, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.limitEvents(0, 0); err != nil || c.Events() != nil {
		t.Fatalf("limitEvents(0) = %v, Events() = %v: want each node's own client", err, c.Events())
	}
	// One event at once, then one per 1000 s, for all nodes together.
	if err := c.limitEvents(0.001, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}
	if _, err := c.Events().CoreV1().Events("ns").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatalf("first event: %v", err)
	}
	if _, err := c.Events().CoreV1().Events("ns").Create(ctx, ev, metav1.CreateOptions{}); err == nil {
		t.Fatal("second event within the events' limit passed")
	}
	nc, err := c.ForNode()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := nc.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Fatalf("pod request %d waited for the events' limit: %v", i, err)
		}
	}
	if got := c.Requests(); got != 4 {
		t.Fatalf("Requests = %d, want 4 (the refused event was never sent)", got)
	}
}

// rss reports the process's resident set in bytes: the figure of
// /proc/self/statm (resident pages), read independently, within 20%.
func TestRSSIsTheProcesss(t *testing.T) {
	got := rss()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm:", err)
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(data), &size, &resident); err != nil {
		t.Fatalf("statm %q: %v", data, err)
	}
	want := resident * int64(os.Getpagesize())
	if got <= 0 || got < want*8/10 || got > want*12/10 {
		t.Errorf("rss() = %d bytes, want about %d (statm)", got, want)
	}
}
