package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakePods lists the fake runtime's ready sandboxes and running
// containers as kuberuntime.Manager's GetPods does.
type fakePods struct{ rt *fake.Runtime }

func (f fakePods) GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error) {
	sbs, err := f.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, err
	}
	cs, err := f.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, err
	}
	bySandbox := map[string]*kubetypes.Pod{}
	var out []*kubetypes.Pod
	for _, sb := range sbs {
		m := sb.GetMetadata()
		p := &kubetypes.Pod{ID: types.UID(m.GetUid()), Name: m.GetName(), Namespace: m.GetNamespace(), CreatedAt: sb.GetCreatedAt()}
		p.Sandboxes = []*kubetypes.Container{{ID: sb.GetId(), State: kubetypes.ContainerStateRunning, CreatedAt: sb.GetCreatedAt()}}
		bySandbox[sb.GetId()] = p
		out = append(out, p)
	}
	for _, c := range cs {
		if p := bySandbox[c.GetPodSandboxId()]; p != nil {
			p.Containers = append(p.Containers, &kubetypes.Container{ID: c.GetId(), Name: c.GetMetadata().GetName(),
				State: kubetypes.ContainerStateRunning, CreatedAt: c.GetCreatedAt()})
		}
	}
	return out, nil
}

// noRate hides the runtime's usageNanoCores, as a runtime that reports
// only cumulative CPU time does (in container and sandbox stats).
type noRate struct{ *fake.Runtime }

func (n noRate) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	list, err := n.Runtime.ListPodSandboxStats(ctx, f)
	for _, s := range list {
		s.Linux.Cpu.UsageNanoCores = nil
		for _, c := range s.Linux.Containers {
			c.Cpu.UsageNanoCores = nil
		}
	}
	return list, err
}

func (n noRate) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	list, err := n.Runtime.ListContainerStats(ctx, f)
	for _, s := range list {
		s.Cpu.UsageNanoCores = nil
	}
	return list, err
}

type env struct {
	t   testing.TB
	ctx context.Context
	clk *clocktesting.FakeClock
	rt  *fake.Runtime
}

func newEnv(t testing.TB) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: t.Context(), clk: clk, rt: rt}
}

// runPod starts a pod whose containers burn cpu (e.g. "250m") and hold
// memory (e.g. "8Mi"), and returns the container IDs by name.
func (e *env) runPod(ns, name, uid string, containers map[string][2]string) map[string]string {
	e.t.Helper()
	ann := map[string]string{}
	for c, b := range containers {
		ann[fake.BehaviorAnnotation(c)] = "cpu=" + b[0] + ",memory=" + b[1]
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		Labels:      map[string]string{"io.kubernetes.pod.uid": uid},
		Annotations: ann,
	}
	sb, err := e.rt.RunPodSandbox(e.ctx, sbCfg, "")
	if err != nil {
		e.t.Fatal(err)
	}
	ids := map[string]string{}
	for c := range containers {
		id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			Labels:   map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": c},
		}, sbCfg)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.rt.StartContainer(e.ctx, id); err != nil {
			e.t.Fatal(err)
		}
		ids[c] = id
	}
	return ids
}

func (e *env) provider(cfg Config) *Provider {
	e.t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = "node-1"
	}
	if cfg.Runtime == nil {
		cfg.Runtime = e.rt
	}
	if cfg.Pods == nil {
		cfg.Pods = fakePods{e.rt}
	}
	if cfg.Clock == nil {
		cfg.Clock = e.clk
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = procTree(e.t)
	}
	p, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) summary(p *Provider, only bool) *summaryT {
	e.t.Helper()
	s, err := p.Summary(e.ctx, only)
	if err != nil {
		e.t.Fatal(err)
	}
	return (*summaryT)(s)
}

// tree writes files (path relative to root -> content) under root.
func tree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func procTree(t testing.TB) string {
	proc := t.TempDir()
	tree(t, proc, map[string]string{
		"meminfo":                "MemTotal:        8388608 kB\nMemFree:         1000 kB\n",
		"sys/kernel/pid_max":     "4194304\n",
		"sys/kernel/threads-max": "100000\n",
		"loadavg":                "0.50 0.40 0.30 3/612 12345\n",
		"stat":                   "cpu  1 2 3\nbtime 1767000000\n",
		"self/cgroup":            "5:memory:/agent\n4:cpu,cpuacct:/agent\n0::/agent\n",
	})
	return proc
}

var errNotYet = errorString("not started")

type errorString string

func (e errorString) Error() string { return string(e) }
