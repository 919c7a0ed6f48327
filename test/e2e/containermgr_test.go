//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/kuberuntime"
)

const v1Cgroups = "/sys/fs/cgroup"

func cgroupPodManifest(name, image, resources string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: %s
%s`, name, image, trapTerm, resources)
}

// cgFile reads one v1 control file.
func cgFile(t *testing.T, controller, cgroup, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(v1Cgroups, controller, cgroup, file))
	if err != nil {
		t.Fatalf("reading %s: %v", filepath.Join(controller, cgroup, file), err)
	}
	return strings.TrimSpace(string(b))
}

func cgExists(controller, cgroup string) bool {
	_, err := os.Stat(filepath.Join(v1Cgroups, controller, cgroup))
	return err == nil
}

// procCgroups maps v1 controllers to the process's cgroup path.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// TestContainermgrQoSTreeAndPodCgroups runs the in-process agent with the
// container manager on this machine's cgroup v1 hierarchy, under a pods
// cgroup of its own: the QoS tree and the pod cgroups of a Guaranteed, a
// Burstable and a BestEffort pod hold the kubelet's values, the containers
// run inside their pod cgroup, and the pod cgroups are gone once the pods
// are removed.
func TestContainermgrQoSTreeAndPodCgroups(t *testing.T) {
	requireCgroupV1(t)
	e := setup(t)
	mgr, top := e.cgroupManager(t, "kubepods-e2e-", containermgr.Config{
		SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}, true)

	dir, manifests := agentDirs(t)
	writeManifest(t, manifests, "cg-guaranteed", cgroupPodManifest("cg-guaranteed", e.busybox, `    resources:
      requests: {cpu: 500m, memory: 64Mi}
      limits: {cpu: 500m, memory: 64Mi}
`))
	writeManifest(t, manifests, "cg-burstable", cgroupPodManifest("cg-burstable", e.busybox, `    resources:
      requests: {cpu: 200m, memory: 32Mi}
      limits: {cpu: 400m, memory: 128Mi}
`))
	writeManifest(t, manifests, "cg-besteffort", cgroupPodManifest("cg-besteffort", e.busybox, ""))

	agent, err := e.builder(dir, manifests).
		WithCgroups(mgr, mgr).
		WithNodeAllocatable(mgr.NodeAllocatable).
		WithPart("containermgr", mgr.Run).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	names := map[string]v1.PodQOSClass{
		"cg-guaranteed-" + nodeName: v1.PodQOSGuaranteed,
		"cg-burstable-" + nodeName:  v1.PodQOSBurstable,
		"cg-besteffort-" + nodeName: v1.PodQOSBestEffort,
	}
	waitFor(t, 90*time.Second, "the three pods running", func() (bool, string) {
		run := e.running(t)
		n := 0
		for name := range names {
			if run[name] != nil {
				n++
			}
		}
		return n == 3, fmt.Sprintf("%d of 3 running", n)
	})

	// The QoS tree and the allocatable limit on the pods cgroup.
	enforced := mgr.EnforcedAllocatable()
	cpuQ, memQ := enforced[v1.ResourceCPU], enforced[v1.ResourceMemory]
	if got, want := cgFile(t, "cpu", top, "cpu.shares"), strconv.FormatUint(containermgr.MilliCPUToShares(cpuQ.MilliValue()), 10); got != want {
		t.Errorf("%s cpu.shares %s, want %s", top, got, want)
	}
	if got, want := cgFile(t, "memory", top, "memory.limit_in_bytes"), memQ.Value(); got != strconv.FormatInt(want&^4095, 10) && got != strconv.FormatInt(want, 10) {
		t.Errorf("%s memory limit %s, want %d (capacity - 1Gi)", top, got, want)
	}
	if got := cgFile(t, "cpu", top+"/besteffort", "cpu.shares"); got != "2" {
		t.Errorf("besteffort cpu.shares %s, want 2", got)
	}
	if got := cgFile(t, "cpu", top+"/burstable", "cpu.shares"); got != "204" {
		t.Errorf("burstable cpu.shares %s, want 204 (200m requested by Burstable pods)", got)
	}

	// The pod cgroups and the containers inside them.
	type want struct{ shares, quota, memory string }
	wants := map[v1.PodQOSClass]want{
		v1.PodQOSGuaranteed: {"512", "50000", "67108864"},
		v1.PodQOSBurstable:  {"204", "40000", "134217728"},
		v1.PodQOSBestEffort: {"2", "-1", ""},
	}
	run := e.running(t)
	podDirs := map[string]string{}
	for name, class := range names {
		c := run[name]
		uid := c.GetLabels()[kuberuntime.LabelPodUID]
		dir := "/" + top + "/pod" + uid
		if class != v1.PodQOSGuaranteed {
			dir = "/" + top + "/" + strings.ToLower(string(class)) + "/pod" + uid
		}
		podDirs[name] = dir
		w := wants[class]
		if got := cgFile(t, "cpu", dir, "cpu.shares"); got != w.shares {
			t.Errorf("%s: cpu.shares %s, want %s", name, got, w.shares)
		}
		if got := cgFile(t, "cpu", dir, "cpu.cfs_quota_us"); got != w.quota {
			t.Errorf("%s: cpu.cfs_quota_us %s, want %s", name, got, w.quota)
		}
		if w.quota != "-1" {
			if got := cgFile(t, "cpu", dir, "cpu.cfs_period_us"); got != "100000" {
				t.Errorf("%s: cpu.cfs_period_us %s", name, got)
			}
		}
		mem := cgFile(t, "memory", dir, "memory.limit_in_bytes")
		if w.memory != "" && mem != w.memory {
			t.Errorf("%s: memory.limit_in_bytes %s, want %s", name, mem, w.memory)
		}
		if w.memory == "" {
			if v, _ := strconv.ParseInt(mem, 10, 64); v < 1<<50 {
				t.Errorf("%s: BestEffort pod has a memory limit %s", name, mem)
			}
		}
		pid := e.containerPID(t, c.Id)
		cgs := procCgroups(t, pid)
		for _, ctrl := range []string{"cpu", "memory", "pids"} {
			if !strings.HasPrefix(cgs[ctrl], dir+"/") {
				t.Errorf("%s: container pid %d is in %s cgroup %q, not under %s", name, pid, ctrl, cgs[ctrl], dir)
			}
		}
		t.Logf("%s (%s): pod cgroup %s, container cpu cgroup %s", name, class, dir, cgs["cpu"])
	}

	// Remove the pods: their cgroups go, the burstable shares drop back.
	for _, n := range []string{"cg-guaranteed", "cg-burstable", "cg-besteffort"} {
		if err := os.Remove(filepath.Join(manifests, n+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 90*time.Second, "the pod cgroups removed", func() (bool, string) {
		var left []string
		for _, d := range podDirs {
			for _, c := range []string{"cpu", "memory", "pids", "cpuset"} {
				if cgExists(c, d) {
					left = append(left, c+d)
				}
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	// The shares are updated right after the removal (not atomically with it).
	waitFor(t, 10*time.Second, "burstable cpu.shares back to 2 after the pods ended", func() (bool, string) {
		got := cgFile(t, "cpu", top+"/burstable", "cpu.shares")
		return got == "2", "cpu.shares " + got
	})
	if n, err := mgr.CleanupOrphans(t.Context(), nil, true); n != 0 || err != nil {
		t.Errorf("orphans after the pods ended: %d %v", n, err)
	}
}
