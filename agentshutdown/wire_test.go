package agentshutdown_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/nodekittest"
	"github.com/nodekit/nodekit/nodeshutdown"
)

// pod runs "sleep infinity", which dies of SIGTERM at once, unless
// ignoreTerm; grace nil leaves the pod's terminationGracePeriodSeconds unset.
func pod(name string, priority int32, grace *int64, ignoreTerm bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 1},
		Spec: v1.PodSpec{
			HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: grace,
			Priority:   &priority,
			Containers: []v1.Container{{Name: "main", Image: "busybox:1", Command: []string{"sleep", "infinity"}}},
		},
	}
	if ignoreTerm {
		p.Annotations = map[string]string{fake.BehaviorAnnotation("main"): "sigterm=ignore"}
	}
	return p
}

func stops(h *nodekittest.Harness, name string) []time.Duration {
	var out []time.Duration
	for _, e := range h.Events() {
		if !e.Started && e.Pod == name {
			out = append(out, e.At)
		}
	}
	return out
}

// A whole agent on the fake runtime, on virtual time: the shutdown kills
// the non-critical pods first (a pod ignoring SIGTERM at the group's 20s
// budget, one with a 5s grace at 5s), then the critical pod within its
// 10s; every pod ends Failed/Terminated with DisruptionTarget, the node is
// not ready, and a pod arriving meanwhile is refused.
func TestWireShutdownOnFakeRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1")
		sd := agentshutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{
			GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second,
		}})
		if err := sd.Shutdown(t.Context()); !errors.Is(err, agentshutdown.ErrNotBuilt) {
			t.Fatalf("Shutdown before Build: %v, want ErrNotBuilt", err)
		}
		five := int64(5)
		h := nodekittest.Start(t, b)
		static := pod("static", 0, nil, true)
		static.Spec.Priority = nil // a static pod is critical to kubetypes, but killed by its priority
		static.Annotations[kubetypes.ConfigSourceAnnotation] = kubetypes.SourceFile
		pods := []*v1.Pod{
			static,
			pod("web", 0, nil, false),
			pod("stubborn", 0, nil, true),
			pod("short", 100, &five, true),
			pod("critical", kubetypes.SystemCriticalPriority, nil, true),
		}
		h.SetPods(pods...)
		h.WaitFor("pods running", time.Minute, func() bool {
			for _, p := range pods {
				if h.Status(p.Name).Phase != v1.PodRunning {
					return false
				}
			}
			return true
		})
		h.Advance(10 * time.Second)
		checks := h.Agent().NodeReadyChecks()
		if len(checks) != 1 || checks[0]() != nil {
			t.Fatalf("ready checks before the shutdown: %d, want one passing", len(checks))
		}
		start := h.Now()
		done := make(chan error, 1)
		go func() { done <- sd.Shutdown(t.Context()) }()
		h.Advance(time.Second)
		if err := checks[0](); err == nil || err.Error() != "node is shutting down" {
			t.Errorf("ready check during the shutdown: %v", err)
		}
		select {
		case <-h.Agent().NodeStatusUpdateRequests():
		default:
			t.Error("no node status update requested when the shutdown started")
		}
		h.SetPods(append(pods, pod("late", 0, nil, false))...)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := h.Now() - start; took != 30*time.Second {
			t.Errorf("shutdown took %v, want 30s", took)
		}
		h.WaitFor("critical pod's final status", time.Minute, func() bool { return h.Status("critical").Phase == v1.PodFailed })
		want := map[string]time.Duration{"static": 20 * time.Second, "web": 0, "stubborn": 20 * time.Second, "short": 5 * time.Second, "critical": 30 * time.Second}
		for name, at := range want {
			got := stops(h, name)
			if len(got) != 1 || got[0]-start != at {
				t.Errorf("%s stopped at %v (from the start %v), want once at %v", name, got, start, at)
			}
			st := h.Status(name)
			if st.Phase != v1.PodFailed || st.Reason != nodeshutdown.Reason || st.Message != nodeshutdown.Message {
				t.Errorf("%s: status %s/%s/%q, want Failed/Terminated", name, st.Phase, st.Reason, st.Message)
			}
			var dt *v1.PodCondition
			for i := range st.Conditions {
				if st.Conditions[i].Type == v1.DisruptionTarget {
					dt = &st.Conditions[i]
				}
			}
			if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet || dt.Message != nodeshutdown.Message {
				t.Errorf("%s: DisruptionTarget %+v", name, dt)
			}
		}
		late := h.Status("late")
		if late.Phase != v1.PodFailed || late.Reason != nodeshutdown.ReasonNotAdmitted || late.Message != "Pod was rejected: "+nodeshutdown.MessageNotAdmitted {
			t.Errorf("late pod: %s/%s/%q, want refused with NodeShutdown", late.Phase, late.Reason, late.Message)
		}
		if s := h.Starts("late", "main"); len(s) != 0 {
			t.Errorf("late pod started at %v during the shutdown", s)
		}
		if at := h.History("critical"); at[len(at)-1].At-start != 30*time.Second {
			t.Errorf("critical pod's final status at %v, want 30s", at[len(at)-1].At-start)
		}
		// Nothing restarts afterwards.
		h.Advance(5 * time.Minute)
		for _, p := range pods {
			if s := h.Starts(p.Name, "main"); len(s) != 1 {
				t.Errorf("%s started %d times, want once", p.Name, len(s))
			}
		}
	})
}

// A bad grace period fails Build, naming it.
func TestWireBadConfig(t *testing.T) {
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir())
	agentshutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{GracePeriod: 5 * time.Second, GracePeriodCriticalPods: 6 * time.Second}})
	_, err := b.Build()
	if !errors.Is(err, nodeshutdown.ErrInvalidConfig) {
		t.Fatalf("Build: %v, want ErrInvalidConfig", err)
	}
}

// With a Registerer, the state file is kept in the agent's root directory
// (as the kubelet's, in its root directory when its metrics are on): the
// shutdown writes it, and the gauges show it. Without one no file is kept,
// and a StateDir given is kept.
func TestWireStateFileInRootDir(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1")
		sd := agentshutdown.Wire(b, agentshutdown.Config{Shutdown: nodeshutdown.Config{GracePeriod: 30 * time.Second, Registerer: reg}})
		h := nodekittest.Start(t, b)
		root := h.Agent().RootDir()
		if root == "" {
			t.Fatal("the agent has no root directory")
		}
		h.Advance(10 * time.Second)
		start := time.Now() //nodekit:allow clock virtual time of the synctest bubble
		if err := sd.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(root, nodeshutdown.StateFileName))
		if err != nil {
			t.Fatalf("state file: %v", err)
		}
		var s nodeshutdown.State
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("state file %q: %v", raw, err)
		}
		if !s.StartTime.Equal(start) || !s.EndTime.Equal(start) {
			t.Errorf("state file %+v, want start and end at %v (no pods to kill)", s, start)
		}
		for _, name := range []string{"kubelet_graceful_shutdown_start_time_seconds", "kubelet_graceful_shutdown_end_time_seconds"} {
			if got := gatherGauge(t, reg, name); got != float64(start.Unix()) {
				t.Errorf("%s = %v, want %v", name, got, float64(start.Unix()))
			}
		}
	})
	dir := t.TempDir()
	agent, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(dir).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  nodeshutdown.Config
		want string
	}{
		{nodeshutdown.Config{Registerer: prometheus.NewRegistry()}, dir},
		{nodeshutdown.Config{}, ""},
		{nodeshutdown.Config{Registerer: prometheus.NewRegistry(), StateDir: "/elsewhere"}, "/elsewhere"},
	} {
		if got := agentshutdown.ManagerConfig(agent, tc.cfg).StateDir; got != tc.want {
			t.Errorf("ManagerConfig(%+v).StateDir = %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

func gatherGauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}
