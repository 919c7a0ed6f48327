//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
)

// fidelityNodeIP is the node's address in TestClusterFidelityAcrossRestarts:
// an address of TEST-NET-1 (RFC 5737), never routed. Nothing is sent to it;
// it only has to be a valid endpoint address (the API server refuses
// loopback ones in EndpointSlices).
const fidelityNodeIP = "192.0.2.10"

// TestClusterFidelityAcrossRestarts runs an agent on containerd joined to a
// real kube-apiserver (with the upstream EndpointSlice controller) and reads
// back what a new user would see (issue #22):
//   - a host-network static pod (its mirror), a host-network API pod and a
//     pod on the CNI network have hostIP/hostIPs (the node's address),
//     podIP/podIPs (the node's for host-network pods, the sandbox's for the
//     CNI pod), startTime, qosClass, container and image IDs;
//   - a Service selecting the static pod gets an EndpointSlice with the
//     node's address, ready;
//   - the node's kubeletVersion parses as v1.36;
//   - then the agent is restarted three times while the pods are watched:
//     no ADDED or DELETED event, the mirror pod keeps its UID, and no
//     phase, readiness, IP or container goes back.
func TestClusterFidelityAcrossRestarts(t *testing.T) {
	e := newAPIEnv(t)
	if os.Getenv("NODEKIT_ENDPOINTSLICE_CONTROLLER") != "1" {
		t.Fatal("NODEKIT_ENDPOINTSLICE_CONTROLLER is not 1: the API server was started without the EndpointSlice controller (run `hack/kube-apiserver.sh build`, which builds it, then start the API server again)")
	}
	name, endpoint, busybox, nodeClient, admin := e.name, e.endpoint, e.busybox, e.node, e.admin
	ctx := t.Context()
	pods := admin.CoreV1().Pods("default")

	const static, hostPod, cniPod, svcName = "fid-static", "fid-hostnet", "fid-cni", "fid-static"
	mirrorName := static + "-" + name
	ours := map[string]bool{mirrorName: true, hostPod: true, cniPod: true}
	// The service goes after the pods (cleanups run last first).
	deleteService := func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin.CoreV1().Services("default").Delete(cctx, svcName, metav1.DeleteOptions{})
	}
	deleteService() // leftovers of an interrupted run
	t.Cleanup(deleteService)
	e.removePods(t, static, mirrorName, hostPod, cniPod)

	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifests, static, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    app: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: %s
    ports:
    - containerPort: 18080
`, static, svcName, busybox, trapTerm))
	root := filepath.Join(dir, "root")

	// The agent, as examples/cluster runs it; each start is a new process
	// as far as the agent is concerned (new Builder, same root and
	// manifests, the pods left running by the previous one).
	type running struct {
		agent *nodekit.Agent
		stop  func()
	}
	start := func() running {
		t.Helper()
		b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithManifestDir(manifests).WithRootDir(root)
		agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
			Client: nodeClient, NodeName: name, NodeIPs: []net.IP{net.ParseIP(fidelityNodeIP)},
			Logger:       zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
			MirrorPeriod: time.Second, StatusUpdateFrequency: time.Second,
		}).Build()
		if err != nil {
			t.Fatal(err)
		}
		return running{agent: agent, stop: runAgent(t, agent, 60*time.Second)}
	}
	// The Node as a previous agent left it, with another address: the
	// restarted agent's registration returns it before its first status
	// update, and no pod may take that address.
	const staleIP = "203.0.113.99"
	stale, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		stale, err = admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	stale.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: staleIP}, {Type: v1.NodeHostName, Address: name}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cur := start()
	defer func() { cur.stop() }()

	waitNodeReady(t, admin, name, 90*time.Second, "node registered and Ready", "")

	// Two API pods: one on the host's network, one on the CNI network
	// (Guaranteed, so its QoS class is not the default one).
	apiPod := func(podName string, hostNetwork bool) *v1.Pod {
		p := boundPod(podName, name, 2, "", sleeper("main", busybox))
		if !hostNetwork {
			p.Spec.HostNetwork, p.Spec.DNSPolicy = false, ""
			res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: res, Limits: res}
		}
		return p
	}
	for _, p := range []*v1.Pod{apiPod(hostPod, true), apiPod(cniPod, false)} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Service selecting the static pod (its mirror carries the labels).
	if _, err := admin.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: "default"},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": svcName},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(18080), Protocol: v1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	podReady := func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	}
	// steady: every pod Running and Ready with a running, ready container
	// and its IPs.
	steady := func() (map[string]*v1.Pod, bool, string) {
		out := map[string]*v1.Pod{}
		var missing []string
		for n := range ours {
			p, err := pods.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				missing = append(missing, n+": "+err.Error())
				continue
			}
			cs := p.Status.ContainerStatuses
			if p.Status.Phase != v1.PodRunning || !podReady(p) || p.Status.PodIP == "" || p.Status.HostIP == "" ||
				len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready {
				missing = append(missing, fmt.Sprintf("%s: phase %q ready %v podIP %q hostIP %q containers %d", n, p.Status.Phase, podReady(p), p.Status.PodIP, p.Status.HostIP, len(cs)))
				continue
			}
			out[n] = p
		}
		return out, len(missing) == 0, strings.Join(missing, "; ")
	}
	var before map[string]*v1.Pod
	nsPoll(t, 120*time.Second, "the three pods Running and Ready with their IPs", func() (bool, string) {
		var ok bool
		var detail string
		before, ok, detail = steady()
		return ok, detail
	})

	// What the kubelet sets, read back.
	for n, p := range before {
		st := p.Status
		if st.HostIP != fidelityNodeIP || len(st.HostIPs) != 1 || st.HostIPs[0].IP != fidelityNodeIP {
			t.Errorf("%s: hostIP %q hostIPs %v, want the node's %s", n, st.HostIP, st.HostIPs, fidelityNodeIP)
		}
		if len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
			t.Errorf("%s: podIP %q podIPs %v, want podIPs [podIP]", n, st.PodIP, st.PodIPs)
		}
		if n == cniPod {
			if st.PodIP == fidelityNodeIP {
				t.Errorf("%s: pod IP %q is the node's, want the CNI sandbox's", n, st.PodIP)
			}
		} else if st.PodIP != fidelityNodeIP {
			t.Errorf("%s (host network): podIP %q, want the node's %s", n, st.PodIP, fidelityNodeIP)
		}
		if st.StartTime == nil || st.StartTime.IsZero() {
			t.Errorf("%s: no startTime", n)
		}
		wantQOS := v1.PodQOSBestEffort
		if n == cniPod {
			wantQOS = v1.PodQOSGuaranteed
		}
		if st.QOSClass != wantQOS {
			t.Errorf("%s: qosClass %q, want %q", n, st.QOSClass, wantQOS)
		}
		cs := st.ContainerStatuses[0]
		if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.ImageID == "" || cs.Image == "" || cs.Started == nil || !*cs.Started {
			t.Errorf("%s: container status %+v, want a containerd ID, an image and image ID, started", n, cs)
		}
	}

	// The Service's EndpointSlice (the upstream controller) has the static
	// pod at the node's address, ready.
	nsPoll(t, 90*time.Second, "EndpointSlice of the Service with the static pod's address, ready", func() (bool, string) {
		l, err := admin.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svcName})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				ready := e.Conditions.Ready != nil && *e.Conditions.Ready
				target := ""
				if e.TargetRef != nil {
					target = e.TargetRef.Name
				}
				node := ""
				if e.NodeName != nil {
					node = *e.NodeName
				}
				seen = append(seen, fmt.Sprintf("%v ready=%v target=%s node=%s", e.Addresses, ready, target, node))
				if len(e.Addresses) == 1 && e.Addresses[0] == fidelityNodeIP && ready && target == mirrorName && node == name && s.AddressType == discoveryv1.AddressTypeIPv4 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d slices, endpoints %v", len(l.Items), seen)
	})

	// The kubelet version is a semantic version of Kubernetes 1.36.
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := version.ParseSemantic(n.Status.NodeInfo.KubeletVersion); err != nil || v.Major() != 1 || v.Minor() != 36 {
		t.Errorf("kubeletVersion %q: %v, %v; want a semantic version 1.36.x", n.Status.NodeInfo.KubeletVersion, v, err)
	}

	// Three restarts under a watch.
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A client without nsClient's 10s timeout, which would end the watch.
	w, err := watchClient(t, e.adminKC).CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: new(int64(900))})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		violations []string
		modified   int
	)
	// baseline from the list the watch starts at.
	base := map[string]*v1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; ours[p.Name] {
			base[p.Name] = p
		}
	}
	if len(base) != len(ours) {
		t.Fatalf("listed %d of our pods, want %d", len(base), len(ours))
	}
	watchDone := make(chan struct{})
	var stopped atomic.Bool
	go func() {
		defer close(watchDone)
		defer func() {
			if !stopped.Load() {
				mu.Lock()
				violations = append(violations, "the watch ended before the test stopped it: events may be missing")
				mu.Unlock()
			}
		}()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				if stopped.Load() {
					continue // the client reports its own Stop as an error
				}
				mu.Lock()
				violations = append(violations, fmt.Sprintf("watch event %s with %T: %+v", ev.Type, ev.Object, ev.Object))
				mu.Unlock()
				continue
			}
			if !ours[p.Name] {
				continue
			}
			var bad []string
			b := base[p.Name]
			switch ev.Type {
			case watch.Added, watch.Deleted:
				bad = append(bad, fmt.Sprintf("%s %s (uid %s)", ev.Type, p.Name, p.UID))
			case watch.Modified:
				bad = podRegressions(b, p)
				mu.Lock()
				modified++
				mu.Unlock()
			}
			if len(bad) > 0 {
				mu.Lock()
				violations = append(violations, bad...)
				mu.Unlock()
			}
		}
	}()

	lease := func() time.Time {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	for i := range 3 {
		cur.stop()
		restarted := time.Now()
		cur = start()
		a := cur.agent
		// The restarted agent is up: ready, its PLEG healthy, a status for
		// every pod it runs, and its lease renewed since the restart.
		nsPoll(t, 90*time.Second, fmt.Sprintf("restart %d: agent healthy with every pod's status and a renewed lease", i+1), func() (bool, string) {
			select {
			case <-a.Ready():
			default:
				return false, "agent not ready"
			}
			if ok, err := a.PLEG().Healthy(); !ok {
				return false, fmt.Sprintf("PLEG not healthy: %v", err)
			}
			agentPods := a.Pods()
			if len(agentPods) != len(ours) {
				return false, fmt.Sprintf("agent has %d pods, want %d", len(agentPods), len(ours))
			}
			for _, p := range agentPods {
				st, ok := a.StatusManager().GetPodStatus(p.UID)
				if !ok || st.Phase != v1.PodRunning {
					return false, fmt.Sprintf("no Running status for %s yet (%v, %q)", p.Name, ok, st.Phase)
				}
			}
			if r := lease(); !r.After(restarted.Add(-time.Second)) {
				return false, fmt.Sprintf("lease renewed at %v, restart at %v", r, restarted)
			}
			return true, ""
		})
		// ... and the API server shows every pod as before.
		nsPoll(t, 60*time.Second, fmt.Sprintf("restart %d: the three pods Running and Ready", i+1), func() (bool, string) {
			_, ok, detail := steady()
			return ok, detail
		})
	}
	// Let the last agent's status reports land: wait for its next lease
	// renewal (10s), by which time its status manager has offered every
	// status and resynced them all once.
	renewed := lease()
	nsPoll(t, 60*time.Second, "the lease renewed once more after the last restart", func() (bool, string) {
		r := lease()
		return r.After(renewed), fmt.Sprintf("renewed at %v", r)
	})
	stopped.Store(true)
	w.Stop()
	<-watchDone
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("%d MODIFIED events of our pods over three restarts", modified)
	after, ok, detail := steady()
	if !ok {
		t.Fatalf("after the restarts: %s", detail)
	}
	for n, p := range after {
		if p.UID != base[n].UID {
			t.Errorf("%s: UID %s after the restarts, %s before", n, p.UID, base[n].UID)
		}
		for _, r := range podRegressions(base[n], p) {
			t.Error("after the restarts: " + r)
		}
	}
}

// watchClient builds a clientset from a kubeconfig file written by
// hack/kube-apiserver.sh, with no client timeout (for watches).
func watchClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(restConfig(t, kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// podRegressions lists how p went back from b (same pod, earlier): another
// UID, a phase other than Running, readiness lost, another IP, another
// start time or condition transition time, another container or more
// restarts, a container no longer running or ready.
func podRegressions(b, p *v1.Pod) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%s (rv %s): ", p.Name, p.ResourceVersion)+fmt.Sprintf(format, args...))
	}
	if p.UID != b.UID {
		bad("UID %s, was %s", p.UID, b.UID)
	}
	if p.Status.Phase != v1.PodRunning {
		bad("phase %q, was Running", p.Status.Phase)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized, v1.PodReadyToStartContainers} {
		was, now := podCondition(b, ct), podCondition(p, ct)
		if was.Status == v1.ConditionTrue && now.Status != v1.ConditionTrue {
			bad("condition %s %q, was True", ct, now.Status)
		} else if !now.LastTransitionTime.Equal(&was.LastTransitionTime) {
			bad("condition %s moved: last transition %v, was %v", ct, now.LastTransitionTime, was.LastTransitionTime)
		}
	}
	if p.Status.PodIP != b.Status.PodIP || p.Status.HostIP != b.Status.HostIP || len(p.Status.PodIPs) != len(b.Status.PodIPs) || len(p.Status.HostIPs) != len(b.Status.HostIPs) {
		bad("podIPs %v hostIPs %v, were %v %v", p.Status.PodIPs, p.Status.HostIPs, b.Status.PodIPs, b.Status.HostIPs)
	}
	if !p.Status.StartTime.Equal(b.Status.StartTime) {
		bad("startTime %v, was %v", p.Status.StartTime, b.Status.StartTime)
	}
	if len(p.Status.ContainerStatuses) != len(b.Status.ContainerStatuses) {
		bad("%d container statuses, were %d", len(p.Status.ContainerStatuses), len(b.Status.ContainerStatuses))
		return out
	}
	for i, c := range p.Status.ContainerStatuses {
		was := b.Status.ContainerStatuses[i]
		if c.ContainerID != was.ContainerID || c.RestartCount != was.RestartCount || c.ImageID != was.ImageID {
			bad("container %s: id %s restarts %d image %s, was %s %d %s", c.Name, c.ContainerID, c.RestartCount, c.ImageID, was.ContainerID, was.RestartCount, was.ImageID)
		}
		if c.State.Running == nil || !c.Ready {
			bad("container %s: running %v ready %v", c.Name, c.State.Running != nil, c.Ready)
		}
	}
	return out
}

func podCondition(p *v1.Pod, t v1.PodConditionType) v1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}
