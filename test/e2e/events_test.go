//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/kuberuntime"
)

// run builds and runs the cluster agent; it stops when the test ends.
func (e *apiEnv) run(t *testing.T, manifests string, reg prometheus.Registerer) *nodekit.Agent {
	t.Helper()
	b := nodekit.NewBuilder().WithRuntimeEndpoint(e.endpoint).WithRootDir(t.TempDir()).WithProber()
	if manifests != "" {
		b.WithManifestDir(manifests)
	}
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: e.node, NodeName: e.name, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		MirrorPeriod: time.Second, StatusUpdateFrequency: time.Second, PodWatchMaxBackoff: 5 * time.Second,
		Registerer: reg,
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, agent, 60*time.Second)
	return agent
}

// events lists the events about the object named name ("" namespace: the
// node's, stored in default).
func (e *apiEnv) events(t *testing.T, name string) []v1.Event {
	t.Helper()
	l, err := e.admin.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Logf("listing events: %v", err)
		return nil
	}
	return l.Items
}

func summary(evs []v1.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%s %s x%d %q", e.Type, e.Reason, e.Count, e.Message))
	}
	return strings.Join(s, "; ")
}

func apiPod(name, node string, c v1.Container, policy v1.RestartPolicy) *v1.Pod {
	return boundPod(name, node, 1, policy, c)
}

// TestEventsInAPIServer: an agent on containerd joined to a real
// kube-apiserver writes the kubelet's events there: the node's Starting
// and NodeReady; for a pod whose image does not exist, Failed (the pull,
// "Error: ErrImagePull") and the pull's BackOff; for a crash-looping
// container a BackOff counted above 1 (aggregated, not one event per
// restart); for a failing readiness probe, Unhealthy.
func TestEventsInAPIServer(t *testing.T) {
	e := newAPIEnv(t)
	const badImage, crasher, unready = "events-bad-image", "events-crasher", "events-unready"
	e.removePods(t, badImage, crasher, unready)
	// The Node as the node lifecycle controller leaves it when its agent
	// stopped reporting: Ready Unknown. The agent's first status turns it
	// True, which the kubelet records as NodeReady (on a new node the
	// first status is often already True, and the kubelet records no
	// event for a condition it sets for the first time).
	e.markNodeUnknown(t)
	started := time.Now()
	e.run(t, "", nil)

	pods := []*v1.Pod{
		apiPod(badImage, e.name, v1.Container{Name: "main", Image: "localhost/nodekit/does-not-exist:1", ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"true"}}, v1.RestartPolicyAlways),
		apiPod(crasher, e.name, v1.Container{Name: "main", Image: e.busybox, ImagePullPolicy: v1.PullNever,
			Command: []string{"sh", "-c", "exit 1"}}, v1.RestartPolicyAlways),
		apiPod(unready, e.name, v1.Container{Name: "main", Image: e.busybox, ImagePullPolicy: v1.PullNever,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo not ready; exit 1"}}},
				PeriodSeconds: 1, TimeoutSeconds: 5, FailureThreshold: 1}}, v1.RestartPolicyAlways),
	}
	for _, p := range pods {
		if _, err := e.admin.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	has := func(evs []v1.Event, typ, reason, msgPart string, minCount int32) bool {
		return slices.ContainsFunc(evs, func(ev v1.Event) bool {
			return ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Message, msgPart) && ev.Count >= minCount &&
				ev.Source.Component == "kubelet" && ev.Source.Host == e.name
		})
	}
	nsPoll(t, 2*time.Minute, "node events Starting and NodeReady", func() (bool, string) {
		evs := e.events(t, e.name)
		ok := slices.ContainsFunc(evs, func(ev v1.Event) bool {
			return ev.Reason == "Starting" && ev.InvolvedObject.Kind == "Node" && ev.LastTimestamp.After(started.Add(-time.Second))
		}) && slices.ContainsFunc(evs, func(ev v1.Event) bool {
			return ev.Reason == "NodeReady" && ev.Message == "Node "+e.name+" status is now: NodeReady" && ev.LastTimestamp.After(started.Add(-time.Second))
		})
		return ok, summary(evs)
	})
	nsPoll(t, 3*time.Minute, "image pull Failed, ErrImagePull and BackOff", func() (bool, string) {
		evs := e.events(t, badImage)
		return has(evs, v1.EventTypeWarning, "Failed", `Failed to pull image "localhost/nodekit/does-not-exist:1"`, 1) &&
			has(evs, v1.EventTypeWarning, "Failed", "Error: ErrImagePull", 1) &&
			has(evs, v1.EventTypeNormal, "BackOff", `Back-off pulling image "localhost/nodekit/does-not-exist:1"`, 1), summary(evs)
	})
	nsPoll(t, 3*time.Minute, "crash loop BackOff counted above 1", func() (bool, string) {
		evs := e.events(t, crasher)
		return has(evs, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container main in pod "+crasher+"_default", 2), summary(evs)
	})
	nsPoll(t, 2*time.Minute, "readiness Unhealthy", func() (bool, string) {
		evs := e.events(t, unready)
		return has(evs, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: not ready", 1), summary(evs)
	})
	for _, p := range []string{crasher, unready} {
		for _, ev := range e.events(t, p) {
			if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.UID == "" ||
				(ev.InvolvedObject.FieldPath != "" && ev.InvolvedObject.FieldPath != "spec.containers{main}") {
				t.Errorf("event %s %s about %+v", ev.Reason, ev.Message, ev.InvolvedObject)
			}
		}
	}
	t.Logf("crasher: %s", summary(e.events(t, crasher)))
}

// TestEventsAPIServerUnreachable: with kube-apiserver stopped, static pods
// start as fast as with it up (events never block the agent) and the
// events that cannot be written are dropped and counted
// (nodekit_events_dropped_total rises).
func TestEventsAPIServerUnreachable(t *testing.T) {
	e := newAPIEnv(t)
	t.Cleanup(func() { apiServerScript(t, "start-apiserver") })
	manifests := t.TempDir()
	reg := prometheus.NewRegistry()
	agent := e.run(t, manifests, reg)
	e.removePods(t, "events-static-up", "events-static-down", "events-static-up-"+e.name, "events-static-down-"+e.name)
	nsPoll(t, 2*time.Minute, "node Ready", func() (bool, string) {
		n, err := e.admin.CoreV1().Nodes().Get(t.Context(), e.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})

	// startTime writes a static pod and returns how long until its
	// container runs in containerd.
	startTime := func(name string) time.Duration {
		t.Helper()
		t0 := time.Now()
		writeManifest(t, manifests, name, manifest(name, e.busybox, "1"))
		nsPoll(t, 2*time.Minute, name+" running", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs, err := e.cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
				State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
				LabelSelector: map[string]string{kuberuntime.LabelPodName: name + "-" + e.name},
			})
			return err == nil && len(cs) == 1, fmt.Sprint(len(cs), err)
		})
		return time.Since(t0)
	}
	dropped := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, mf := range mfs {
			if mf.GetName() == "nodekit_events_dropped_total" {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}

	up := startTime("events-static-up")
	before := dropped()
	apiServerScript(t, "stop-apiserver")
	down := startTime("events-static-down")
	t.Logf("static pod start: %v with the API server up, %v with it down", up, down)
	if limit := 2*up + 10*time.Second; down > limit {
		t.Errorf("with the API server down a static pod took %v to start, against %v with it up", down, up)
	}
	// The pod's events (Pulled, Created, Started) and the node's cannot be
	// written: they are dropped and counted.
	nsPoll(t, time.Minute, "drop counter rising", func() (bool, string) {
		return dropped() > before, fmt.Sprintf("dropped %v, before the outage %v", dropped(), before)
	})
	select {
	case <-agent.Done():
		t.Fatalf("the agent stopped during the outage: %v", agent.Err())
	default:
	}
}

// markNodeUnknown makes the Node exist with its Ready condition Unknown.
func (e *apiEnv) markNodeUnknown(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	nodes := e.admin.CoreV1().Nodes()
	n, err := nodes.Get(ctx, e.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = nodes.Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.name}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	unknown := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown",
		Message: "Kubelet stopped posting node status.", LastHeartbeatTime: now, LastTransitionTime: now}
	conds := []v1.NodeCondition{unknown}
	for _, c := range n.Status.Conditions {
		if c.Type != v1.NodeReady {
			conds = append(conds, c)
		}
	}
	n.Status.Conditions = conds
	if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
