package clusterapiserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	evapiserver "github.com/nodekit/nodekit/events/apiserver"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/nodestatus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const node = "n1"

func machine(context.Context) (*nodestatus.Machine, error) {
	return &nodestatus.Machine{NumCores: 2, MemoryCapacity: 4 << 30, EphemeralStorage: 10 << 30}, nil
}

// waitUntil polls cond every 20ms until it holds or fails after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		case <-tick.C:
		}
	}
}

func TestWireConfigErrors(t *testing.T) {
	_, err := clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()),
		clusterapiserver.Config{NodeName: node}).Build()
	if !errors.Is(err, clusterapiserver.ErrInvalidConfig) {
		t.Fatalf("Build = %v, want ErrInvalidConfig", err)
	}
	_, err = clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()),
		clusterapiserver.Config{Client: fake.NewClientset(), NodeName: node,
			WrapPodSource: func(nodekit.PodSourceFunc) nodekit.PodSourceFunc { return nil }}).Build()
	if !errors.Is(err, clusterapiserver.ErrInvalidConfig) || !strings.Contains(err.Error(), "WrapPodSource") {
		t.Fatalf("Build with a nil wrapped source = %v, want ErrInvalidConfig naming WrapPodSource", err)
	}
	for _, v := range []string{"nodekit", "v1.36", " v1.36.3", "v1.36.3+", "v1.36.3+node_kit"} {
		_, err = clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()),
			clusterapiserver.Config{Client: fake.NewClientset(), NodeName: node, AgentVersion: v}).Build()
		if !errors.Is(err, clusterapiserver.ErrInvalidConfig) || !strings.Contains(err.Error(), "AgentVersion") {
			t.Errorf("AgentVersion %q: Build = %v, want ErrInvalidConfig naming AgentVersion", v, err)
		}
	}
	if _, err = clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()),
		clusterapiserver.Config{Client: fake.NewClientset(), NodeName: node, AgentVersion: "v1.36.3-rc.1+edge.7"}).Build(); err != nil {
		t.Errorf("a semantic AgentVersion refused: %v", err)
	}
}

const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: static-web
  namespace: default
spec:
  containers:
  - name: c
    image: busybox
`

func TestWireRunsAPIPodsAndMirrorsStaticPods(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "static.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	lg := zap.NewNop()
	b := nodekit.NewBuilder().WithLogger(lg).WithFakeRuntime("busybox").WithRootDir(t.TempDir()).WithManifestDir(dir)
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: client, NodeName: node, Machine: machine, Logger: lg, MirrorPeriod: 50 * time.Millisecond,
		StatusUpdateFrequency: 50 * time.Millisecond, NodeIPs: []net.IP{net.ParseIP("192.0.2.7")}, ServerPort: 10250, DeclaredFeatures: []string{"ExtendWebSocketsToKubelet"},
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	phase := func(name string) (v1.PodPhase, *v1.Pod) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", nil
		}
		return p.Status.Phase, p
	}
	waitUntil(t, 20*time.Second, "API pod Running in the API server", func() (bool, string) {
		ph, _ := phase("web")
		return ph == v1.PodRunning, string(ph)
	})
	// Events are written to the API server by default: the node's
	// Starting, the API pod's container Started.
	waitUntil(t, 20*time.Second, "Starting and Started events", func() (bool, string) {
		l, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var starting, started bool
		var seen []string
		for _, e := range l.Items {
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason)
			starting = starting || (e.Reason == "Starting" && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Source.Host == node)
			started = started || (e.Reason == "Started" && e.InvolvedObject.Name == "web" && e.InvolvedObject.FieldPath == "spec.containers{c}")
		}
		return starting && started, fmt.Sprint(seen)
	})
	waitUntil(t, 20*time.Second, "mirror pod Running", func() (bool, string) {
		ph, p := phase("static-web-" + node)
		if p == nil {
			return false, "no mirror pod"
		}
		_, mirror := p.Annotations[kubetypes.ConfigMirrorAnnotation]
		return mirror && ph == v1.PodRunning && len(p.OwnerReferences) == 1 && p.OwnerReferences[0].Kind == "Node",
			fmt.Sprintf("phase %q annotations %v owners %v", ph, p.Annotations, p.OwnerReferences)
	})
	waitUntil(t, 20*time.Second, "node registered and Ready", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p := n.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10250 {
			return false, fmt.Sprintf("kubeletEndpoint.port %d", p)
		}
		if f := n.Status.DeclaredFeatures; len(f) != 1 || f[0] != "ExtendWebSocketsToKubelet" {
			return false, fmt.Sprintf("declaredFeatures %v", f)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, c.Message
			}
		}
		return false, "no Ready condition"
	})
	// The node reports a kubelet version that parses as v1.36, and every
	// pod has the node's address as its host IP.
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv := n.Status.NodeInfo.KubeletVersion
	if v, err := version.ParseSemantic(kv); err != nil || v.Major() != 1 || v.Minor() != 36 || kv != nodestatus.DefaultAgentVersion {
		t.Errorf("kubeletVersion %q (%v, %v), want %s parsing as v1.36", kv, v, err, nodestatus.DefaultAgentVersion)
	}
	for _, name := range []string{"web", "static-web-" + node} {
		_, p := phase(name)
		if p == nil || p.Status.HostIP != "192.0.2.7" || len(p.Status.HostIPs) != 1 || p.Status.HostIPs[0].IP != "192.0.2.7" {
			t.Errorf("pod %s: status %+v, want hostIP(s) 192.0.2.7", name, p)
		}
	}
	waitUntil(t, 20*time.Second, "node lease", func() (bool, string) {
		_, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Deleting the pod (graceful: a deletion timestamp) makes the agent
	// stop it and remove the object.
	_, p := phase("web")
	now := metav1.Now()
	grace := int64(1)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "deleted pod removed from the API server", func() (bool, string) {
		_, p := phase("web")
		if p == nil {
			return true, ""
		}
		return false, string(p.Status.Phase)
	})
	if _, p := phase("static-web-" + node); p == nil {
		t.Fatal("the mirror pod was deleted")
	}
}

// TestWireReportsEvictionPressure: with WithEviction, the node's
// MemoryPressure condition in the API server follows the eviction manager.
func TestWireReportsEvictionPressure(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	hard, err := eviction.ParseThresholds(map[string]string{"memory.available": "500Mi"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 100Mi available: under the 500Mi threshold from the first cycle.
	stats := eviction.NewFakeStats(&eviction.Summary{Memory: &eviction.MemoryStats{AvailableBytes: 100 << 20, WorkingSetBytes: 4 << 30}})
	lg := zap.NewNop()
	b := nodekit.NewBuilder().WithLogger(lg).WithFakeRuntime("busybox").WithRootDir(t.TempDir()).
		WithEviction(eviction.Config{Thresholds: hard, Stats: stats, Interval: 50 * time.Millisecond})
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: client, NodeName: node, Machine: machine, Logger: lg, StatusUpdateFrequency: 50 * time.Millisecond,
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	condition := func(typ v1.NodeConditionType) (v1.NodeCondition, bool) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return v1.NodeCondition{}, false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == typ {
				return c, true
			}
		}
		return v1.NodeCondition{}, false
	}
	waitUntil(t, 20*time.Second, "MemoryPressure True in the API server", func() (bool, string) {
		c, ok := condition(v1.NodeMemoryPressure)
		return ok && c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
	if c, ok := condition(v1.NodeDiskPressure); !ok || c.Status != v1.ConditionFalse {
		t.Errorf("DiskPressure %+v, want False", c)
	}
}

// A WithNodeReadyCheck check makes the node NotReady with its message, and
// RequestNodeStatusUpdate reports it at once (not at the next 10s period):
// the node shutdown's path.
func TestWireNodeReadyCheckAndUpdateNow(t *testing.T) {
	client := fake.NewClientset()
	var shuttingDown atomic.Bool
	b := nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()).
		WithNodeReadyCheck(func() error {
			if shuttingDown.Load() {
				return errors.New("node is shutting down")
			}
			return nil
		})
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: node, Machine: machine, NoEvents: true}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	ready := func() (v1.NodeCondition, bool) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return v1.NodeCondition{}, false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c, true
			}
		}
		return v1.NodeCondition{}, false
	}
	waitUntil(t, 10*time.Second, "node Ready", func() (bool, string) {
		c, _ := ready()
		return c.Status == v1.ConditionTrue, c.Message
	})
	shuttingDown.Store(true)
	agent.RequestNodeStatusUpdate()
	waitUntil(t, 3*time.Second, "node NotReady at once", func() (bool, string) {
		c, _ := ready()
		return c.Status == v1.ConditionFalse && c.Reason == "KubeletNotReady" && c.Message == "node is shutting down", c.Message
	})
}

// Events.Client, when set, writes the events; Client writes none.
func TestWireEventsClient(t *testing.T) {
	client, eventsClient := fake.NewClientset(), fake.NewClientset()
	b := nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir())
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: node, Machine: machine,
		Events: evapiserver.Config{Client: eventsClient}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitUntil(t, 20*time.Second, "the node's Starting event from the events client", func() (bool, string) {
		l, err := eventsClient.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Reason == "Starting" && e.InvolvedObject.Kind == "Node" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(l.Items))
	})
	if _, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		t.Errorf("the Node is not written through Client: %v", err)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "events" {
			t.Errorf("an event written through Client: %s %s", a.GetVerb(), a.GetResource())
		}
	}
}

// MaxPods and PodsPerCore make the node's pods capacity (2 cores × 3 = 6,
// under maxPods 17); LeaseDurationSeconds is the lease's duration;
// Reservation is held back from the allocatable memory (4Gi - 1Gi).
func TestWireNodeCapacityAndLease(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	lg := zap.NewNop()
	b := nodekit.NewBuilder().WithLogger(lg).WithFakeRuntime("busybox").WithRootDir(t.TempDir())
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: client, NodeName: node, Machine: machine, Logger: lg, StatusUpdateFrequency: 50 * time.Millisecond,
		StatusReportFrequency: time.Second, MaxPods: 17, PodsPerCore: 3, LeaseDurationSeconds: 12,
		Reservation: func() v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")} },
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	waitUntil(t, 20*time.Second, "pods capacity 6 and a 12 s lease", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods := n.Status.Capacity[v1.ResourcePods]
		mem := n.Status.Allocatable[v1.ResourceMemory]
		d := l.Spec.LeaseDurationSeconds
		return pods.Value() == 6 && d != nil && *d == 12 && mem.Value() == 3<<30,
			fmt.Sprintf("pods %s, lease %v, allocatable memory %s", pods.String(), d, mem.String())
	})
}

// TestWireLeaseRenewInterval: LeaseRenewInterval sets how often the lease
// is renewed (here every 50ms, so its renew time moves on at once).
func TestWireLeaseRenewInterval(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	agent, err := clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(t.TempDir()),
		clusterapiserver.Config{Client: client, NodeName: node, Machine: machine, NoEvents: true,
			LeaseDurationSeconds: 8, LeaseRenewInterval: 50 * time.Millisecond}).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	var first time.Time
	renewals := 0
	waitUntil(t, 20*time.Second, "lease renewed 3 times", func() (bool, string) {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, fmt.Sprint(err)
		}
		if !l.Spec.RenewTime.Time.Equal(first) {
			first = l.Spec.RenewTime.Time
			renewals++
		}
		return renewals > 3, l.Spec.RenewTime.String()
	})
}
