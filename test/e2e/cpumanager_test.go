//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/topology"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

type cpuAdmitter struct{ m *cpumanager.Manager }

func (a cpuAdmitter) Admit(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
	ok, reason, msg := a.m.Admit(pod, active)
	return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
}

// cgroupCPUs reads the cpuset.cpus of the process's cpuset cgroup (cgroup v1).
func cgroupCPUs(t *testing.T, pid int) (string, string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ",cpuset,") {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", parts[2], "cpuset.cpus"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b)), parts[2]
		}
	}
	t.Fatalf("no cpuset cgroup for pid %d in:\n%s", pid, data)
	return "", ""
}

// TestCPUManagerStaticPinsGuaranteedContainer: on this 2-cpu machine with
// cpu 0 reserved, a Guaranteed 1-cpu container gets cpu 1 to itself (its
// cgroup's cpuset.cpus says so) and a BestEffort container runs on cpu 0.
func TestCPUManagerStaticPinsGuaranteedContainer(t *testing.T) {
	e := setup(t)
	e.cleanup(t)
	t.Cleanup(func() { e.cleanup(t) })
	topo, err := topology.Discover("/")
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() != 2 {
		t.Skipf("this test expects a 2-cpu machine, found %s", topo)
	}
	dir := t.TempDir()
	mgr, err := cpumanager.New(cpumanager.Config{
		Policy: cpumanager.PolicyStatic, Topology: topo, NumReservedCPUs: 1,
		StateDir: filepath.Join(dir, "cpumanager"), Runtime: e.cri,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mgr.ReservedCPUs().String(); got != "0" {
		t.Fatalf("reserved %s, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := mgr.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifests, "pinned", cgroupPodManifest("pinned", e.busybox, `    resources:
      requests: {cpu: "1", memory: 64Mi}
      limits: {cpu: "1", memory: 64Mi}
`))
	writeManifest(t, manifests, "shared", cgroupPodManifest("shared", e.busybox, ""))

	agent, err := e.builder(dir, manifests).
		WithAdmitHandler(cpuAdmitter{mgr}).
		WithRuntimeConfig(func(c *kuberuntime.Config) { c.CPUSets = mgr }).
		WithPart("cpumanager", mgr.Run).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()
	pinned, shared := "pinned-"+nodeName, "shared-"+nodeName
	waitFor(t, 60*time.Second, "both pods running", func() (bool, string) {
		run := e.running(t)
		return run[pinned] != nil && run[shared] != nil, fmt.Sprintf("%d running", len(run))
	})
	run := e.running(t)
	uid := run[pinned].GetLabels()[kuberuntime.LabelPodUID]
	if set, excl := mgr.GetCPUSet(uid, "main"); !excl || set.String() != "1" {
		t.Errorf("manager: pinned container has %s (exclusive %v), want 1", set, excl)
	}
	got, path := cgroupCPUs(t, e.containerPID(t, run[pinned].Id))
	t.Logf("pinned container: cgroup %s cpuset.cpus=%s", path, got)
	if got != "1" {
		t.Errorf("the Guaranteed container's cpuset.cpus is %q, want \"1\"", got)
	}
	got, path = cgroupCPUs(t, e.containerPID(t, run[shared].Id))
	t.Logf("shared container: cgroup %s cpuset.cpus=%s", path, got)
	if got != "0" {
		t.Errorf("the BestEffort container's cpuset.cpus is %q, want \"0\" (the pool without the exclusive cpu)", got)
	}
	// The reconcile pass keeps both as they are.
	if err := mgr.Reconcile(ctx); err != nil {
		t.Errorf("Reconcile: %v", err)
	}
	if got, _ := cgroupCPUs(t, e.containerPID(t, run[pinned].Id)); got != "1" {
		t.Errorf("after Reconcile the pinned cpuset is %q", got)
	}
	// A second Guaranteed pod does not fit: only reserved cpu 0 is left.
	writeManifest(t, manifests, "second", cgroupPodManifest("second", e.busybox, `    resources:
      requests: {cpu: "1", memory: 64Mi}
      limits: {cpu: "1", memory: 64Mi}
`))
	// Wait for the agent's admission decision (a rejected pod is Failed at
	// once) rather than a fixed pause; the check below is what counts.
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	_, st, err := agent.WaitForPod(wctx, "default", "second-"+nodeName, nodekit.PodPhase(v1.PodFailed))
	wcancel()
	if err != nil {
		t.Logf("the second pod's rejection not seen: %v", err)
	} else {
		t.Logf("the second pod: %s (%s)", st.Reason, st.Message)
	}
	if _, ok := e.running(t)["second-"+nodeName]; ok {
		t.Error("a second 1-cpu Guaranteed pod runs although no cpu is left")
	}
}
