//go:build e2e && linux

package stats_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/stats"
)

// TestE2ESummaryBusyboxPod runs a busybox pod on the containerd named by
// NODEKIT_CRI_ENDPOINT (1.6 or 2.x), in a pod cgroup under a pods cgroup of
// its own, and polls the summary until the pod and its container have
// non-zero CPU time and working set, from the CRI and from the pod cgroup,
// and the node its CPU, memory and file systems; then the resource
// collector reports the pod. containerd samples stats every
// stats_collect_period (10 s in hack/containerd.sh), hence the deadline.
func TestE2ESummaryBusyboxPod(t *testing.T) {
	ep := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if ep == "" {
		t.Skip("NODEKIT_CRI_ENDPOINT is not set: start containerd with hack/containerd.sh")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containers")
	}
	busybox := os.Getenv("NODEKIT_BUSYBOX_IMAGE")
	if busybox == "" {
		busybox = "localhost/nodekit/busybox:1"
	}
	ctx := t.Context()
	c, err := remote.New(remote.Config{Endpoint: ep, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect %s: %v", ep, err)
	}
	mgr, err := kuberuntime.New(kuberuntime.Config{Runtime: c, Images: c})
	if err != nil {
		t.Fatal(err)
	}

	podsCgroup := fmt.Sprintf("nodekit-stats-e2e-%d", time.Now().UnixNano())
	const (
		ns, name = "nodekit-e2e", "statsbox"
		uid      = "stats-e2e-0000-0000-000000000001"
	)
	logsRoot := t.TempDir()
	podLogs := filepath.Join(logsRoot, ns+"_"+name+"_"+uid)
	if err := os.MkdirAll(podLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{
		kuberuntime.LabelPodUID: uid, kuberuntime.LabelPodName: name, kuberuntime.LabelPodNamespace: ns,
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		LogDirectory: podLogs,
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/" + podsCgroup + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.StopPodSandbox(ctx, sb); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if err := c.RemovePodSandbox(ctx, sb); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
		removeCgroups(t, podsCgroup)
	})
	ctrLabels := map[string]string{kuberuntime.LabelContainerName: "app"}
	for k, v := range labels {
		ctrLabels[k] = v
	}
	ctr, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: busybox},
		// Some CPU (a short count), some memory (a 4 MiB tmpfs-less
		// buffer in the shell), some log lines, then sleep.
		Command: []string{"sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; " +
			"x=$(head -c 4000000 /dev/zero | tr '\\0' a); echo started ${#x}; exec sleep 3600"},
		LogPath: "app/0.log",
		Labels:  ctrLabels,
		Linux:   &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{}},
	}, sbConfig)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, ctr); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	p, err := stats.New(stats.Config{
		NodeName: "e2e-node", Runtime: c, Pods: mgr,
		CgroupRoot: "/sys/fs/cgroup", PodsCgroup: podsCgroup,
		NodeFsPath: t.TempDir(), PodLogsRoot: logsRoot,
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var pod *statsapi.PodStats
	deadline := time.Now().Add(90 * time.Second)
	for {
		s, err := p.Summary(ctx, false)
		if err != nil {
			t.Fatalf("Summary: %v", err)
		}
		pod, problems = check(s, uid)
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s the summary still has: %s\npod: %s", strings.Join(problems, "; "), dump(pod))
		}
		select { // poll again in a second
		case <-ctx.Done():
			t.Fatalf("waiting for the summary: %v", ctx.Err())
		case <-time.After(time.Second):
		}
	}
	t.Logf("pod %s: cpu %d ns, working set %d B; container cpu %d ns, %d B", name,
		*pod.CPU.UsageCoreNanoSeconds, *pod.Memory.WorkingSetBytes,
		*pod.Containers[0].CPU.UsageCoreNanoSeconds, *pod.Containers[0].Memory.WorkingSetBytes)

	// Without cgroups: the pod's CPU and memory from ListPodSandboxStats
	// (or the container sums where the runtime has none).
	sbStats, err := c.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{Id: sb})
	t.Logf("ListPodSandboxStats: %d sandboxes, err %v; cpu %v, memory %v", len(sbStats), err,
		firstOrNil(sbStats).GetLinux().GetCpu(), firstOrNil(sbStats).GetLinux().GetMemory())
	noCgroups, err := stats.New(stats.Config{NodeName: "e2e-node", Runtime: c, Pods: mgr})
	if err != nil {
		t.Fatal(err)
	}
	s, err := noCgroups.Summary(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := check(s, uid); !onlyProblems(problems, "fs: ", "node CPU", "the pods system") {
		t.Errorf("summary without cgroups: %s", strings.Join(problems, "; "))
	}

	only, err := p.Summary(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := check(only, uid); !onlyProblems(problems, "fs: ") {
		t.Errorf("only_cpu_and_memory summary: %s", strings.Join(problems, "; "))
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stats.NewResourceCollector(p, stats.CollectorConfig{Context: t.Context()}))
	n, err := testutil.GatherAndCount(reg, "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
		"pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes", "node_cpu_usage_seconds_total", "node_memory_working_set_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Errorf("the resource collector reports %d of the node, pod and container CPU and memory series, want at least 6", n)
	}
}

// check lists what the summary lacks for the pod uid.
func check(s *statsapi.Summary, uid string) (*statsapi.PodStats, []string) {
	var problems []string
	nz := func(what string, v *uint64) {
		if v == nil || *v == 0 {
			problems = append(problems, what+" is zero or missing")
		}
	}
	if s.Node.CPU == nil || s.Node.Memory == nil {
		problems = append(problems, "node CPU or memory missing")
	} else {
		nz("node CPU", s.Node.CPU.UsageCoreNanoSeconds)
		nz("node working set", s.Node.Memory.WorkingSetBytes)
	}
	pods := false
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods && c.Memory != nil && c.Memory.WorkingSetBytes != nil && *c.Memory.WorkingSetBytes > 0 {
			pods = true
		}
	}
	if !pods {
		problems = append(problems, "the pods system container is missing or without memory")
	}
	if s.Node.Fs == nil {
		problems = append(problems, "fs: node fs missing")
	}
	var pod *statsapi.PodStats
	for i := range s.Pods {
		if s.Pods[i].PodRef.UID == uid {
			pod = &s.Pods[i]
		}
	}
	if pod == nil {
		return nil, append(problems, "the pod is missing")
	}
	if pod.CPU == nil || pod.Memory == nil {
		problems = append(problems, "pod CPU or memory missing")
	} else {
		nz("pod CPU", pod.CPU.UsageCoreNanoSeconds)
		nz("pod working set", pod.Memory.WorkingSetBytes)
	}
	if len(pod.Containers) != 1 {
		return pod, append(problems, fmt.Sprintf("%d containers", len(pod.Containers)))
	}
	ctr := pod.Containers[0]
	if ctr.CPU == nil || ctr.Memory == nil {
		problems = append(problems, "container CPU or memory missing")
	} else {
		nz("container CPU", ctr.CPU.UsageCoreNanoSeconds)
		nz("container working set", ctr.Memory.WorkingSetBytes)
	}
	if ctr.StartTime.IsZero() || pod.StartTime.IsZero() {
		problems = append(problems, "start time missing")
	}
	if pod.EphemeralStorage == nil {
		problems = append(problems, "fs: pod ephemeral storage missing")
	}
	return pod, problems
}

// onlyProblems: every problem starts with one of the prefixes (what the
// summary is not expected to have).
func onlyProblems(problems []string, prefixes ...string) bool {
	for _, p := range problems {
		ok := false
		for _, pre := range prefixes {
			ok = ok || strings.HasPrefix(p, pre)
		}
		if !ok {
			return false
		}
	}
	return true
}

func firstOrNil(l []*runtimeapi.PodSandboxStats) *runtimeapi.PodSandboxStats {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

func dump(p *statsapi.PodStats) string {
	if p == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%+v cpu=%+v mem=%+v", p.PodRef, p.CPU, p.Memory)
	for _, c := range p.Containers {
		fmt.Fprintf(&b, " [%s cpu=%+v mem=%+v]", c.Name, c.CPU, c.Memory)
	}
	return b.String()
}

// removeCgroups removes the test's pods cgroup, deepest first, in every
// hierarchy (v1 controllers or the v2 root).
func removeCgroups(t *testing.T, rel string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		top := filepath.Join(r, rel)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Logf("cgroup %s left behind: %v", dirs[i], err)
			}
		}
	}
}
