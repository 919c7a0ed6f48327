//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/nodeshutdown"
)

// shutdownPod is a pod of the shutdown test: busybox, host network, the
// command, an optional preStop exec hook, grace and priority class.
func shutdownPod(name, node, image, command string, preStop string, grace *int64, critical bool) *v1.Pod {
	no := false
	c := v1.Container{Name: "main", Image: image, Command: []string{"sh", "-c", command},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		ImagePullPolicy: v1.PullNever}
	if preStop != "" {
		c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", preStop}}}}
	}
	p := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node, HostNetwork: true, DNSPolicy: v1.DNSDefault, RestartPolicy: v1.RestartPolicyAlways,
			AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: grace,
			Containers: []v1.Container{c},
		},
	}
	if critical {
		// The class resolves to this priority in the API server; a static
		// pod carries both, as kubeadm's do.
		prio := int32(2000000000)
		p.Spec.PriorityClassName, p.Spec.Priority = "system-cluster-critical", &prio
	}
	return p
}

// TestGracefulShutdownOnContainerd: an agent on containerd shut down by
// the embedding program's call (this machine has no logind: no systemd runs
// as PID 1 and there is no system bus, so the logind path is covered by
// nodeshutdown/systemd's tests) with shutdownGracePeriod 12s and
// shutdownGracePeriodCriticalPods 4s. A pod's preStop hook runs (its
// effect is the container's termination message) and the pod stops at
// once after it; a pod ignoring SIGTERM is killed at its group's 8s budget;
// the critical pod is killed only then, within its 4s; a pod arriving
// during the shutdown is refused. With an API server (NODEKIT_APISERVER_URL)
// the pods are API pods, plus a static pod (without a priority: in the
// first group, as in the kubelet) whose status shows on its mirror pod, and
// the test reads there: Failed/Terminated with the kubelet's message and a
// DisruptionTarget condition, the node NotReady "node is shutting down";
// without one they are all static pods read from the agent.
func TestGracefulShutdownOnContainerd(t *testing.T) {
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if endpoint == "" {
		t.Skip("NODEKIT_CRI_ENDPOINT is not set: start containerd with `bash hack/containerd.sh start` and load its env")
	}
	if out, err := exec.Command("busctl", "status").CombinedOutput(); err == nil {
		t.Logf("note: a system bus answers here (%s); the test still uses the manual call", strings.SplitN(string(out), "\n", 2)[0])
	}
	busybox := getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	withAPI := os.Getenv("NODEKIT_APISERVER_URL") != ""
	node := getenv("NODEKIT_NODE_NAME", "shutdown-e2e")
	cri, err := remote.New(remote.Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := cri.Connect(t.Context()); err != nil {
		t.Fatalf("containerd at %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cri.Close(context.Background()) })

	thirty := int64(30)
	const (
		hookCmd     = "trap 'exit 0' TERM; sleep 3600 & wait"
		stubbornCmd = "trap '' TERM; while true; do sleep 1; done"
		preStop     = "echo prestop-ran > /dev/termination-log; sleep 2"
	)
	names := []string{"sd-hook", "sd-stubborn", "sd-critical", "sd-late"}
	pods := []*v1.Pod{
		shutdownPod("sd-hook", node, busybox, hookCmd, preStop, &thirty, false),
		shutdownPod("sd-stubborn", node, busybox, stubbornCmd, "", nil, false),
		shutdownPod("sd-critical", node, busybox, stubbornCmd, "", nil, true),
	}
	late := shutdownPod("sd-late", node, busybox, hookCmd, "", nil, false)
	// static: pods given as manifests (all of them without an API server;
	// with one, sd-static, whose status the API server shows on its
	// mirror pod).
	static := map[string]bool{}
	if withAPI {
		pods = append(pods, shutdownPod("sd-static", node, busybox, stubbornCmd, "", nil, false))
		static["sd-static"] = true
		names = append(names, "sd-static", "sd-static-"+node)
	}

	var admin kubernetes.Interface
	manifests := t.TempDir()
	local := newStatusSink()
	// runtimeName is the pod's name on the node (a static pod's has the
	// node's name appended).
	runtimeName := func(n string) string {
		if static[n] {
			return n + "-" + node
		}
		return n
	}
	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithRootDir(t.TempDir()).WithManifestDir(manifests)
	if withAPI {
		env := &apiEnv{name: node, endpoint: endpoint, busybox: busybox,
			node: nsClient(t, os.Getenv("NODEKIT_NODE_KUBECONFIG")), admin: nsClient(t, os.Getenv("NODEKIT_ADMIN_KUBECONFIG")), cri: cri}
		env.removePods(t, names...)
		admin = env.admin
		clusterapiserver.Wire(b, clusterapiserver.Config{
			Client: env.node, NodeName: node, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
			MirrorPeriod: time.Second, StatusUpdateFrequency: 10 * time.Second, PodWatchMaxBackoff: 5 * time.Second,
		})
	} else {
		runtimeName = func(n string) string { return n + "-" + node }
		b.WithNodeName(node).WithStatusSink(local).WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
		ours := func(m *runtimeapi.PodSandboxMetadata) bool {
			return slices.ContainsFunc(names, func(n string) bool { return m.GetName() == n+"-"+node })
		}
		t.Cleanup(func() { removeSandboxes(t, cri, ours) })
		removeSandboxes(t, cri, ours)
	}
	sd := agentshutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{
		GracePeriod: 12 * time.Second, GracePeriodCriticalPods: 4 * time.Second,
	}})
	agent, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, agent, 60*time.Second)

	add := func(p *v1.Pod) {
		t.Helper()
		if withAPI && !static[p.Name] {
			if _, err := admin.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s: %v", p.Name, err)
			}
			return
		}
		q := p.DeepCopy()
		q.Spec.NodeName = ""
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		writeManifest(t, manifests, p.Name+".json", string(b))
	}
	status := func(name string) v1.PodStatus {
		if !withAPI {
			return local.get(runtimeName(name))
		}
		p, err := admin.CoreV1().Pods("default").Get(t.Context(), runtimeName(name), metav1.GetOptions{})
		if err != nil {
			return v1.PodStatus{}
		}
		return p.Status
	}
	for _, p := range pods {
		add(p)
	}
	nsPoll(t, 60*time.Second, "the pods running", func() (bool, string) {
		var s []string
		ok := true
		for _, p := range pods {
			st := status(p.Name)
			s = append(s, p.Name+"="+string(st.Phase))
			ok = ok && st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil
		}
		return ok, strings.Join(s, " ")
	})
	if withAPI {
		nsPoll(t, 30*time.Second, "node Ready", func() (bool, string) {
			c := nodeReady(t, admin, node)
			return c.Status == v1.ConditionTrue, c.Message
		})
	}

	// Let the pod workers finish the syncs that started the containers (a
	// kill cancels them, but a loaded machine makes that slow to show).
	time.Sleep(2 * time.Second)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- sd.Shutdown(t.Context()) }()
	if withAPI {
		nsPoll(t, 8*time.Second, "node NotReady at once", func() (bool, string) {
			c := nodeReady(t, admin, node)
			return c.Status == v1.ConditionFalse && c.Reason == "KubeletNotReady" && c.Message == "node is shutting down", c.Reason + " " + c.Message
		})
	}
	add(late)
	var took time.Duration
	select {
	case err := <-done:
		took = time.Since(start)
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Shutdown did not return within 60s")
	}
	if took < 11*time.Second || took > 16*time.Second {
		t.Errorf("the shutdown took %v, want about 12s (8s + 4s)", took)
	}

	// When each container finished, from containerd. Shutdown returns at
	// the last group's budget, as the kubelet releases its lock then: the
	// critical pod's kill, due at that moment, may still be completing.
	finished := map[string]time.Duration{}
	for _, p := range pods {
		nsPoll(t, 10*time.Second, p.Name+"'s container exited", func() (bool, string) {
			cs, err := cri.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": runtimeName(p.Name)}})
			if err != nil || len(cs) != 1 {
				return false, fmt.Sprintf("%d containers (%v), want 1", len(cs), err)
			}
			st, err := cri.ContainerStatus(t.Context(), cs[0].Id, false)
			if err != nil {
				return false, err.Error()
			}
			if st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				return false, st.Status.State.String()
			}
			finished[p.Name] = time.Unix(0, st.Status.FinishedAt).Sub(start)
			return true, ""
		})
	}
	t.Logf("shutdown took %v; containers finished after %v", took, finished)
	for name, want := range map[string][2]time.Duration{
		// The 2s hook, then SIGTERM ends it: before the group's budget.
		"sd-hook": {1500 * time.Millisecond, 7500 * time.Millisecond},
		// Killed at the group's 8s, not at its own 30s.
		"sd-stubborn": {7500 * time.Millisecond, 20 * time.Second},
		// Killed from 8s on, with its 4s.
		"sd-critical": {11500 * time.Millisecond, 25 * time.Second},
		// A static pod without a priority: the first group, as in the
		// kubelet.
		"sd-static": {7500 * time.Millisecond, 20 * time.Second},
	} {
		if got, ok := finished[name]; ok && (got < want[0] || got > want[1]) {
			t.Errorf("%s finished %v after the start, want between %v and %v", name, got, want[0], want[1])
		}
	}

	for _, p := range pods {
		nsPoll(t, 30*time.Second, p.Name+" Failed/Terminated", func() (bool, string) {
			st := status(p.Name)
			return st.Phase == v1.PodFailed && st.Reason == nodeshutdown.Reason, fmt.Sprintf("%s/%s", st.Phase, st.Reason)
		})
		st := status(p.Name)
		if st.Message != "Pod was terminated in response to imminent node shutdown." {
			t.Errorf("%s: message %q", p.Name, st.Message)
		}
		var dt *v1.PodCondition
		for i := range st.Conditions {
			if st.Conditions[i].Type == v1.DisruptionTarget {
				dt = &st.Conditions[i]
			}
		}
		if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != st.Message {
			t.Errorf("%s: DisruptionTarget %+v", p.Name, dt)
		}
		if p.Name == "sd-hook" {
			if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil ||
				!strings.Contains(st.ContainerStatuses[0].State.Terminated.Message, "prestop-ran") {
				t.Errorf("sd-hook: the preStop hook's termination message is missing: %+v", st.ContainerStatuses)
			}
		}
	}
	nsPoll(t, 30*time.Second, "the late pod refused", func() (bool, string) {
		st := status("sd-late")
		return st.Phase == v1.PodFailed && st.Reason == "NodeShutdown", fmt.Sprintf("%s/%s %q", st.Phase, st.Reason, st.Message)
	})
	if cs, _ := cri.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.name": runtimeName("sd-late")}}); len(cs) != 0 {
		t.Errorf("the late pod has %d containers: started during the shutdown", len(cs))
	}
	if withAPI {
		if c := nodeReady(t, admin, node); c.Status != v1.ConditionFalse || c.Message != "node is shutting down" {
			t.Errorf("node Ready %s %q after the shutdown, want False \"node is shutting down\"", c.Status, c.Message)
		}
	}
}

func nodeReady(t *testing.T, admin kubernetes.Interface, node string) v1.NodeCondition {
	n, err := admin.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		return v1.NodeCondition{Message: err.Error()}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	return v1.NodeCondition{}
}
