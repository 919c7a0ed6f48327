package stats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

type summaryT statsapi.Summary

func (s *summaryT) pod(t *testing.T, name string) *statsapi.PodStats {
	t.Helper()
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	t.Fatalf("pod %s not in the summary (%d pods)", name, len(s.Pods))
	return nil
}

func container(t *testing.T, p *statsapi.PodStats, name string) *statsapi.ContainerStats {
	t.Helper()
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	t.Fatalf("container %s not in pod %s", name, p.PodRef.Name)
	return nil
}

func val(v *uint64) any {
	if v == nil {
		return "<nil>"
	}
	return *v
}

func TestNewValidates(t *testing.T) {
	e := newEnv(t)
	_, err := New(Config{CgroupRoot: "rel", PodsCgroup: "../x", NodeFsPath: "x"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"NodeName", "Runtime", "Pods", "CgroupRoot", "PodsCgroup", "NodeFsPath"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := New(Config{NodeName: "n", Runtime: e.rt, Pods: fakePods{e.rt}, PodsCgroup: "/kubepods/"}); err != nil {
		t.Errorf("New with a valid config: %v", err)
	}
}

// The fake runtime's simulated stats reach the summary: pods with their
// names, namespaces, UIDs and sandbox start times, their running
// containers' CPU and memory, and pod totals summed from the containers
// when no pod cgroup is read.
func TestSummaryFromFakeRuntime(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"nginx": {"250m", "8Mi"}, "sidecar": {"50m", "2Mi"}})
	e.clk.Step(time.Second)
	e.runPod("kube-system", "dns", "uid-dns", map[string][2]string{"coredns": {"100m", "16Mi"}})
	e.clk.Step(10 * time.Second)
	p := e.provider(Config{})
	s := e.summary(p, false)

	if s.Node.NodeName != "node-1" {
		t.Errorf("node name %q", s.Node.NodeName)
	}
	if got := s.Node.StartTime.Unix(); got != 1767000000 {
		t.Errorf("node start time %d, want the boot time 1767000000", got)
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Namespace != "default" || s.Pods[1].PodRef.Namespace != "kube-system" {
		t.Fatalf("pods %+v, want default/web then kube-system/dns", s.Pods)
	}
	web := s.pod(t, "web")
	if web.PodRef.UID != "uid-web" || !web.StartTime.Time.Equal(t0) {
		t.Errorf("web ref %+v start %v, want uid-web at %v", web.PodRef, web.StartTime, t0)
	}
	if dns := s.pod(t, "dns"); !dns.StartTime.Time.Equal(t0.Add(time.Second)) {
		t.Errorf("dns start %v, want its sandbox's creation %v", dns.StartTime, t0.Add(time.Second))
	}
	if len(web.Containers) != 2 || web.Containers[0].Name != "nginx" || web.Containers[1].Name != "sidecar" {
		t.Fatalf("web containers %+v", web.Containers)
	}
	nginx := container(t, web, "nginx")
	if got := val(nginx.CPU.UsageNanoCores); got != uint64(250_000_000) {
		t.Errorf("nginx usageNanoCores %v, want 250000000", got)
	}
	if got := val(nginx.CPU.UsageCoreNanoSeconds); got != uint64(2_750_000_000) {
		t.Errorf("nginx usageCoreNanoSeconds %v, want 11 s x 250m", got)
	}
	if got := val(nginx.Memory.WorkingSetBytes); got != uint64(8<<20) {
		t.Errorf("nginx working set %v, want 8Mi", got)
	}
	if !nginx.StartTime.Time.Equal(t0) || !nginx.CPU.Time.Time.Equal(t0.Add(11*time.Second)) {
		t.Errorf("nginx start %v, cpu time %v", nginx.StartTime, nginx.CPU.Time)
	}
	if nginx.Rootfs == nil || val(nginx.Rootfs.UsedBytes) != uint64(4096) {
		t.Errorf("nginx rootfs %+v, want the writable layer's 4096 bytes", nginx.Rootfs)
	}
	if web.CPU == nil || val(web.CPU.UsageNanoCores) != uint64(300_000_000) {
		t.Errorf("web pod CPU %+v, want the containers' 300m", web.CPU)
	}
	if web.Memory == nil || val(web.Memory.WorkingSetBytes) != uint64(10<<20) {
		t.Errorf("web pod memory %+v, want 10Mi", web.Memory)
	}
	if web.EphemeralStorage == nil || val(web.EphemeralStorage.UsedBytes) != uint64(8192) {
		t.Errorf("web ephemeral storage %+v, want two writable layers", web.EphemeralStorage)
	}
	if web.ProcessStats == nil || val(web.ProcessStats.ProcessCount) != uint64(3) {
		t.Errorf("web process stats %+v, want the sandbox stats' 3", web.ProcessStats)
	}
	if s.Node.Rlimit == nil || *s.Node.Rlimit.MaxPID != 100000 || *s.Node.Rlimit.NumOfRunningProcesses != 612 {
		t.Errorf("rlimit %+v", s.Node.Rlimit)
	}
}

// The fake runtime answers both stats calls with non-zero CPU and memory
// for running containers (the simulated defaults: 10m, 2 MiB).
func TestFakeRuntimeStatsNonZero(t *testing.T) {
	e := newEnv(t)
	ids := e.runPod("default", "p", "uid-p", nil)
	_ = ids
	sb, _ := e.rt.ListPodSandbox(e.ctx, nil)
	id, err := e.rt.CreateContainer(e.ctx, sb[0].Id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "plain"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(5 * time.Second)
	cs, err := e.rt.ListContainerStats(e.ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ListContainerStats = %d, %v", len(cs), err)
	}
	if cs[0].Cpu.UsageCoreNanoSeconds.Value == 0 || cs[0].Cpu.UsageNanoCores.Value == 0 || cs[0].Memory.WorkingSetBytes.Value == 0 {
		t.Errorf("container stats with zeros: %v", cs[0])
	}
	ps, err := e.rt.ListPodSandboxStats(e.ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil || len(ps) != 1 {
		t.Fatalf("ListPodSandboxStats = %d, %v", len(ps), err)
	}
	l := ps[0].Linux
	if l.Cpu.UsageCoreNanoSeconds.Value == 0 || l.Memory.WorkingSetBytes.Value == 0 || len(l.Containers) != 1 {
		t.Errorf("sandbox stats with zeros: %v", ps[0])
	}
}

// Without a rate from the runtime, usageNanoCores is the rate between two
// Summary calls, for containers and for pods.
func TestSummaryCPURateFromTwoSamples(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"400m", "4Mi"}})
	p := e.provider(Config{Runtime: noRate{e.rt}})
	e.clk.Step(time.Second)
	s := e.summary(p, false)
	app := container(t, s.pod(t, "web"), "app")
	if app.CPU.UsageNanoCores != nil {
		t.Fatalf("first sample has usageNanoCores %d, want none", *app.CPU.UsageNanoCores)
	}
	if app.CPU.UsageCoreNanoSeconds == nil || *app.CPU.UsageCoreNanoSeconds != 400_000_000 {
		t.Fatalf("usageCoreNanoSeconds %v", val(app.CPU.UsageCoreNanoSeconds))
	}
	e.clk.Step(10 * time.Second)
	s = e.summary(p, true)
	app = container(t, s.pod(t, "web"), "app")
	if got := val(app.CPU.UsageNanoCores); got != uint64(400_000_000) {
		t.Errorf("usageNanoCores after two samples %v, want 400000000", got)
	}
	if got := val(s.pod(t, "web").CPU.UsageNanoCores); got != uint64(400_000_000) {
		t.Errorf("pod usageNanoCores %v, want 400000000", got)
	}
	// A third call at the same instant keeps the rate.
	s = e.summary(p, true)
	if got := val(container(t, s.pod(t, "web"), "app").CPU.UsageNanoCores); got != uint64(400_000_000) {
		t.Errorf("usageNanoCores at an unchanged sample %v, want the kept 400000000", got)
	}
}

// A container that goes between two calls leaves the summary and the rate
// cache; one that comes has no rate yet.
func TestSummaryContainerGoneBetweenCalls(t *testing.T) {
	e := newEnv(t)
	ids := e.runPod("default", "web", "uid-web", map[string][2]string{"a": {"100m", "1Mi"}, "b": {"200m", "1Mi"}})
	p := e.provider(Config{Runtime: noRate{e.rt}})
	e.summary(p, true)
	// Samples: each container's and the pod's (from its sandbox stats).
	if n := p.rates.len(); n != 3 {
		t.Fatalf("rate cache holds %d samples, want 3", n)
	}
	if err := e.rt.StopContainer(e.ctx, ids["b"], 0); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.RemoveContainer(e.ctx, ids["b"]); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(2 * time.Second)
	s := e.summary(p, true)
	web := s.pod(t, "web")
	if len(web.Containers) != 1 || web.Containers[0].Name != "a" {
		t.Fatalf("containers after b went: %+v", web.Containers)
	}
	if got := val(web.Containers[0].CPU.UsageNanoCores); got != uint64(100_000_000) {
		t.Errorf("a's rate %v, want 100000000", got)
	}
	if n := p.rates.len(); n != 2 {
		t.Errorf("rate cache holds %d samples after b went, want 2", n)
	}
	e.runPod("default", "late", "uid-late", map[string][2]string{"c": {"100m", "1Mi"}})
	s = e.summary(p, true)
	if c := container(t, s.pod(t, "late"), "c"); c.CPU.UsageNanoCores != nil {
		t.Errorf("a new container has a rate %d on its first sample", *c.CPU.UsageNanoCores)
	}
	if n := p.rates.len(); n != 4 {
		t.Errorf("rate cache holds %d samples, want 4", n)
	}
}

// only_cpu_and_memory: CPU, memory and start times, nothing else.
func TestSummaryOnlyCPUAndMemory(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	e.clk.Step(time.Second)
	p := e.provider(Config{NodeFsPath: t.TempDir()})
	full := e.summary(p, false)
	if full.Node.Fs == nil || full.Node.Runtime == nil || full.Node.Rlimit == nil || full.pod(t, "web").EphemeralStorage == nil {
		t.Fatalf("the full summary lacks fs, runtime, rlimit or ephemeral storage: %+v", full.Node)
	}
	s := e.summary(p, true)
	if s.Node.Fs != nil || s.Node.Runtime != nil || s.Node.Rlimit != nil || s.Node.Network != nil {
		t.Errorf("node has more than CPU and memory: %+v", s.Node)
	}
	web := s.pod(t, "web")
	if web.EphemeralStorage != nil || web.Network != nil || web.VolumeStats != nil || web.ProcessStats != nil {
		t.Errorf("pod has more than CPU and memory: %+v", web)
	}
	app := container(t, web, "app")
	if app.Rootfs != nil || app.Logs != nil {
		t.Errorf("container has more than CPU and memory: %+v", app)
	}
	if app.CPU == nil || app.Memory == nil || web.CPU == nil || web.Memory == nil || app.StartTime.IsZero() {
		t.Errorf("CPU, memory or start time missing: %+v", web)
	}
}

type failingStats struct{ err error }

func (f failingStats) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, f.err
}

func TestSummaryErrors(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	p := e.provider(Config{Runtime: failingStats{status.Error(codes.Unavailable, "down")}})
	if _, err := p.Summary(e.ctx, false); !errors.Is(err, ErrStats) || !strings.Contains(err.Error(), "ListContainerStats") {
		t.Errorf("Summary with a failing runtime = %v, want ErrStats naming ListContainerStats", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.provider(Config{}).Summary(ctx, false); !errors.Is(err, context.Canceled) {
		t.Errorf("Summary with an ended context = %v", err)
	}
}

// A runtime without ListPodSandboxStats (Unimplemented) is asked once.
type noSandboxStats struct {
	*fake.Runtime
	calls *int
}

func (n noSandboxStats) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	*n.calls++
	return nil, status.Error(codes.Unimplemented, "no")
}

func TestSummarySandboxStatsUnimplementedAskedOnce(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	calls := 0
	p := e.provider(Config{Runtime: noSandboxStats{e.rt, &calls}})
	for range 3 {
		s := e.summary(p, false)
		if got := val(s.pod(t, "web").CPU.UsageNanoCores); got != uint64(100_000_000) {
			t.Fatalf("pod CPU from the containers %v, want 100000000", got)
		}
	}
	if calls != 1 {
		t.Errorf("ListPodSandboxStats asked %d times, want 1", calls)
	}
}

// The sandbox stats carry the containers' stats: ListContainerStats is
// asked only when they miss a running container.
func TestSummaryContainerStatsFromSandboxStats(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	p := e.provider(Config{})
	s := e.summary(p, true)
	if got := val(container(t, s.pod(t, "web"), "app").CPU.UsageNanoCores); got != uint64(100_000_000) {
		t.Errorf("app rate %v", got)
	}
	if n := e.rt.CountCalls("ListContainerStats"); n != 0 {
		t.Errorf("ListContainerStats asked %d times though the sandbox stats had every container", n)
	}
	calls := 0
	p = e.provider(Config{Runtime: noSandboxStats{e.rt, &calls}})
	s = e.summary(p, true)
	if len(s.pod(t, "web").Containers) != 1 || e.rt.CountCalls("ListContainerStats") != 1 {
		t.Errorf("without sandbox stats: containers %+v, ListContainerStats asked %d times", s.pod(t, "web").Containers, e.rt.CountCalls("ListContainerStats"))
	}
}
