package nodekit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// recordingHooks is a volume, cgroup and probe manager that records calls.
type recordingHooks struct {
	mu    sync.Mutex
	calls map[string]int
}

func (h *recordingHooks) note(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]int{}
	}
	h.calls[what]++
}

func (h *recordingHooks) count(what string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[what]
}

func (h *recordingHooks) WaitForAttachAndMount(context.Context, *v1.Pod) error {
	h.note("mount")
	return nil
}
func (h *recordingHooks) WaitForUnmount(context.Context, *v1.Pod) error {
	h.note("unmount")
	return nil
}
func (h *recordingHooks) EnsurePodCgroup(context.Context, *v1.Pod) error {
	h.note("cgroup")
	return nil
}
func (h *recordingHooks) DestroyPodCgroup(context.Context, *v1.Pod) error { return nil }
func (h *recordingHooks) AddPod(*v1.Pod)                                  { h.note("probes") }
func (h *recordingHooks) RemovePod(*v1.Pod)                               {}
func (h *recordingHooks) StopLivenessAndStartup(*v1.Pod)                  {}
func (h *recordingHooks) ContainerMounts(context.Context, *v1.Pod, *v1.Container) ([]*runtimeapi.Mount, error) {
	h.note("container mounts")
	return []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp"}}, nil
}
func (h *recordingHooks) PodCgroupParent(*v1.Pod) string { h.note("parent"); return "/kubepods/test" }

var (
	_ syncloop.VolumeHooks             = (*recordingHooks)(nil)
	_ syncloop.CgroupHooks             = (*recordingHooks)(nil)
	_ syncloop.ProbeHooks              = (*recordingHooks)(nil)
	_ kuberuntime.MountProvider        = (*recordingHooks)(nil)
	_ kuberuntime.CgroupParentProvider = (*recordingHooks)(nil)
)

// TestHooksAndParts: the managers given to the Builder are called for a pod,
// their providers reach the CRI configs, and an extra part runs for the
// agent's life and stops before Run returns.
func TestHooksAndParts(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	writeManifests(t, dir, "a")
	h := &recordingHooks{}
	sink := agenttest.NewNameSink()
	partStarted, partStopped := make(chan struct{}), make(chan struct{})
	loopEdited := false
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithVolumes(h, h).
		WithCgroups(h, h).
		WithProbes(h, nil, nil).
		WithRuntimeConfig(func(c *kuberuntime.Config) { c.DNS.ResolvConf = "-" }).
		WithSyncLoopConfig(func(c *syncloop.Config) { loopEdited = true }).
		WithPodTerminated(func(_ context.Context, pod *v1.Pod) error {
			h.note("terminated " + pod.Name)
			return nil
		}).
		WithPart("extra", func(ctx context.Context) error {
			close(partStarted)
			<-ctx.Done()
			close(partStopped)
			return nil
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if !loopEdited {
		t.Error("WithSyncLoopConfig's edit was not applied")
	}
	stop := agenttest.StartAgent(t, agent)
	select {
	case <-partStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the extra part did not start")
	}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod Running", func() (bool, string) {
		return sink.Phases()["a-node1"] == v1.PodRunning, ""
	})
	// The prober hears of the pod when the sync that started it returns,
	// after its status was recorded (syncloop's podSyncer): wait for it
	// rather than assume it came before the Running status.
	agenttest.WaitUntil(t, 20*time.Second, nil, "every hook called", func() (bool, string) {
		var never []string
		for _, what := range []string{"mount", "cgroup", "probes", "container mounts", "parent"} {
			if h.count(what) == 0 {
				never = append(never, what)
			}
		}
		return len(never) == 0, fmt.Sprintf("hooks never called: %v", never)
	})
	if got := agent.ActivePods(); len(got) != 1 || got[0].Name != "a-node1" {
		t.Errorf("ActivePods() = %v, want the one pod", got)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, nil, "the PodTerminated hook", func() (bool, string) {
		return h.count("terminated a-node1") == 1, fmt.Sprint(h.count("unmount"))
	})
	if h.count("unmount") == 0 {
		t.Error("the pod's volumes were never unmounted before PodTerminated")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-partStopped:
	default:
		t.Fatal("the extra part was still running after Run returned")
	}
}

func TestWithPartNeedsNameAndFunc(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithPart("", nil).Build()
	if err == nil {
		t.Fatal("Build accepted a part without a name or func")
	}
}

// TestWithAgentPart: make gets the built Agent; its run func runs with the
// agent and stops with it; an error from make fails Build, naming the part.
func TestWithAgentPart(t *testing.T) {
	var got *nodekit.Agent
	started, stopped := make(chan struct{}), make(chan struct{})
	agent, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithAgentPart("api", func(a *nodekit.Agent) (func(context.Context) error, error) {
			got = a
			if a.Loop() == nil || a.Runtime() == nil {
				return nil, errors.New("agent not built yet")
			}
			return func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				close(stopped)
				return nil
			}, nil
		}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if got != agent {
		t.Fatal("make did not get the built Agent")
	}
	stop := agenttest.StartAgent(t, agent)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent part did not start")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the agent part was still running after Run returned")
	}
	_, err = nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithAgentPart("api", func(*nodekit.Agent) (func(context.Context) error, error) {
			return nil, errors.New("no port")
		}).Build()
	if err == nil || !strings.Contains(err.Error(), "api") || !strings.Contains(err.Error(), "no port") {
		t.Fatalf("Build with a failing agent part: %v", err)
	}
	if _, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithAgentPart("", nil).Build(); err == nil {
		t.Fatal("Build accepted an agent part without a name")
	}
}
