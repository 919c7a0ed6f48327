package nodekit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/syncloop"
)

func writeManifests(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n+".yaml"), []byte(agenttest.PodManifest(n, agenttest.Forever)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runningContainers(t *testing.T, rt *fake.Runtime) map[string]string {
	t.Helper()
	cs, err := rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cs {
		out[c.Labels[kuberuntime.LabelPodName]] = c.Id
	}
	return out
}

// TestAgentRunsManifestPods runs three static pods on the fake runtime with
// the real clock, removes one, then stops the agent: every goroutine exits
// and the remaining containers are left running.
func TestAgentRunsManifestPods(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	writeManifests(t, dir, "a", "b", "c")
	sink := agenttest.NewNameSink()
	agent, err := nodekit.NewBuilder().
		WithNodeName("Node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	select {
	case <-agent.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("agent not ready after 10s")
	}

	want := []string{"a-node1", "b-node1", "c-node1"}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "3 pods Running", func() (bool, string) {
		ph := sink.Phases()
		for _, n := range want {
			if ph[n] != v1.PodRunning {
				return false, fmt.Sprint(ph)
			}
		}
		return true, ""
	})
	if got := len(agent.Pods()); got != 3 {
		t.Errorf("agent.Pods() has %d pods, want 3", got)
	}
	rt := agent.FakeRuntime()
	if got := runningContainers(t, rt); len(got) != 3 {
		t.Errorf("running containers: %v, want one per pod", got)
	}
	for _, p := range agent.Pods() {
		if st, ok := agent.StatusManager().GetPodStatus(p.UID); !ok || st.Phase != v1.PodRunning {
			t.Errorf("status manager: pod %s: %v %v", p.Name, ok, st.Phase)
		}
	}

	// Removing a manifest stops that pod only.
	before := runningContainers(t, rt)
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, nil, "pod b to stop", func() (bool, string) {
		got := runningContainers(t, rt)
		_, b := got["b-node1"]
		return !b && len(got) == 2, fmt.Sprint(got)
	})
	after := runningContainers(t, rt)
	for _, n := range []string{"a-node1", "c-node1"} {
		if after[n] != before[n] {
			t.Errorf("pod %s: container %s replaced by %s", n, before[n], after[n])
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("Run returned %v after a cancel, want nil", err)
	}
	select {
	case <-agent.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
	if agent.Err() != nil {
		t.Errorf("Err() = %v", agent.Err())
	}
	// An agent is not a supervisor: stopping it leaves the pods running.
	if got := runningContainers(t, rt); len(got) != 2 {
		t.Errorf("after the agent stopped: running %v, want a and c", got)
	}
	if err := agent.Run(t.Context()); !errors.Is(err, nodekit.ErrAlreadyRan) {
		t.Errorf("second Run: %v, want ErrAlreadyRan", err)
	}
}

// TestAdmission: the admit handlers and the node's allocatable resources
// given to the Builder reach the sync loop; rejected pods fail and get no
// containers.
func TestAdmission(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	writeManifests(t, dir, "a", "b")
	big := agenttest.PodManifest("big", agenttest.Forever) + "    resources: {requests: {cpu: \"8\"}}\n"
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := agenttest.NewNameSink()
	agent, err := nodekit.NewBuilder().
		WithNodeName("n").
		WithFakeRuntime().
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithNodeAllocatable(func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
		}).
		WithAdmitHandler(syncloop.AdmitFunc(func(pod *v1.Pod, _ []*v1.Pod) syncloop.AdmitResult {
			if pod.Name == "b-n" {
				return syncloop.AdmitResult{Reason: "NotB", Message: "no b pods here"}
			}
			return syncloop.AdmitResult{Admit: true}
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "a Running, b and big Failed", func() (bool, string) {
		ph := sink.Phases()
		return ph["a-n"] == v1.PodRunning && ph["b-n"] == v1.PodFailed && ph["big-n"] == v1.PodFailed, fmt.Sprint(ph)
	})
	b, _ := sink.Status("b-n")
	bigSt, _ := sink.Status("big-n")
	if b.Reason != "NotB" || !strings.Contains(b.Message, "no b pods here") {
		t.Errorf("b: reason %q message %q", b.Reason, b.Message)
	}
	if bigSt.Reason != syncloop.ReasonOutOfCPU {
		t.Errorf("big: reason %q, want %q", bigSt.Reason, syncloop.ReasonOutOfCPU)
	}
	if got := runningContainers(t, agent.FakeRuntime()); len(got) != 1 || got["a-n"] == "" {
		t.Errorf("running containers %v, want only a's", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

type failingSource struct{ err error }

func (s failingSource) Run(ctx context.Context) error { return s.err }

type quietSource struct{ out chan<- kubetypes.PodUpdate }

func (s quietSource) Run(ctx context.Context) error {
	select {
	case s.out <- kubetypes.PodUpdate{Op: kubetypes.SET}:
	case <-ctx.Done():
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestPartFailureStopsAgent: a source that fails stops the whole agent,
// and Run names it.
func TestPartFailureStopsAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	agent, err := nodekit.NewBuilder().
		WithNodeName("n").
		WithFakeRuntime().
		WithRootDir(t.TempDir()).
		WithPodSource("quiet", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return quietSource{out}, nil
		}).
		WithPodSource("flaky", func(chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return failingSource{boom}, nil
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	err = agent.Run(t.Context())
	if !errors.Is(err, boom) || !errors.Is(err, nodekit.ErrPartStopped) || !strings.Contains(err.Error(), "flaky") {
		t.Fatalf("Run = %v, want the flaky source's error", err)
	}
	if !errors.Is(agent.Err(), boom) {
		t.Errorf("Err() = %v", agent.Err())
	}
}

// TestConnectFailure: an endpoint nobody listens on fails Run at once.
func TestConnectFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	agent, err := nodekit.NewBuilder().
		WithNodeName("n").
		WithRuntimeEndpoint("unix://" + filepath.Join(t.TempDir(), "none.sock")).
		WithRootDir(t.TempDir()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Run(t.Context()); !errors.Is(err, nodekit.ErrConnect) {
		t.Fatalf("Run = %v, want ErrConnect", err)
	}
}

// TestBuildReportsEveryProblem: one Build names every bad setting.
func TestBuildReportsEveryProblem(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, err := nodekit.NewBuilder().
		WithRuntimeEndpoint("tcp://10.0.0.1:1234").
		WithRootDir("relative/dir").
		WithPodSource("", nil).
		WithPodSource("x", nil).
		WithAdmitHandler(nil).
		Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) {
		t.Fatalf("Build = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{
		"NodeName is required",
		"RootDir \"relative/dir\" must be an absolute path",
		"runtime/remote", "Endpoint",
		"empty source name",
		"WithPodSource(\"x\"): nil source func",
		"syncloop", "Admitters[0]",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build error lacks %q:\n%v", want, err)
		}
	}

	_, err = nodekit.NewBuilder().WithNodeName("n").WithRootDir("/x").Build()
	if err == nil || !strings.Contains(err.Error(), "no runtime") {
		t.Errorf("no runtime: %v", err)
	}
	_, err = nodekit.NewBuilder().WithNodeName("n").WithRootDir("/x").WithFakeRuntime().WithRuntimeEndpoint("unix:///a").Build()
	if err == nil || !strings.Contains(err.Error(), "2 runtimes") {
		t.Errorf("two runtimes: %v", err)
	}
	_, err = nodekit.NewBuilder().WithNodeName("n").WithRootDir("/x").WithRuntime(nil).Build()
	if err == nil || !strings.Contains(err.Error(), "nil runtime") {
		t.Errorf("nil runtime: %v", err)
	}
	srcErr := errors.New("bad url")
	_, err = nodekit.NewBuilder().WithNodeName("n").WithRootDir("/x").WithFakeRuntime().
		WithPodSource("http", func(chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) { return nil, srcErr }).
		WithPodSource("nil", func(chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) { return nil, nil }).
		Build()
	if !errors.Is(err, srcErr) || !strings.Contains(err.Error(), "podconfig source http") ||
		!strings.Contains(err.Error(), "podconfig source nil") {
		t.Errorf("source errors: %v", err)
	}
	_, err = nodekit.NewBuilder().WithNodeName("n").WithRootDir("/x").WithFakeRuntime().WithManifestDir("/m").
		WithPodSource(kubetypes.SourceFile, func(chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) { return nil, nil }).
		Build()
	if err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate source: %v", err)
	}
}

// TestBuildDoesNoIO: Build with an endpoint and a manifest directory that
// don't exist succeeds, starts no goroutine and creates nothing.
func TestBuildDoesNoIO(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := filepath.Join(t.TempDir(), "root")
	a, err := nodekit.NewBuilder().
		WithNodeName("n").
		WithRuntimeEndpoint("unix:///nonexistent/containerd.sock").
		WithManifestDir("/nonexistent/manifests").
		WithRootDir(root).
		WithNotificationMode(podconfig.Snapshot).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Build touched the root dir: %v", err)
	}
	if a.Runtime() == nil || a.PodConfig() == nil || a.PLEG() == nil || a.Loop() == nil || a.CRI() == nil {
		t.Error("a part accessor returned nil")
	}
	if a.FakeRuntime() != nil {
		t.Error("FakeRuntime() is not nil for a remote runtime")
	}
	if _, ok := a.StatusSink().(*podstatus.MemorySink); !ok {
		t.Errorf("default sink is %T, want *podstatus.MemorySink", a.StatusSink())
	}
	select {
	case <-a.Done():
		t.Error("Done closed before Run")
	default:
	}
}
