package cmwire_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/topology"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// TestWithContainerAndCPUManagers: the one-call wirings make a Guaranteed
// pod's cgroup under the QoS tree (an emulated v2 hierarchy in a temp dir),
// give its container exclusive CPUs in its CRI config, and give the CPUs
// back once the pod has stopped.
func TestWithContainerAndCPUManagers(t *testing.T) {
	defer goleak.VerifyNone(t)
	cgroupRoot := t.TempDir()
	cm, err := containermgr.New(containermgr.Config{
		CgroupRoot:    cgroupRoot,
		CgroupVersion: containermgr.V2,
		Capacity:      v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fake.New(fake.Config{Images: []string{"busybox:1"}})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Synthetic(1, 4, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := cpumanager.New(cpumanager.Config{
		Policy: cpumanager.PolicyStatic, Topology: topo, NumReservedCPUs: 1,
		StateDir: t.TempDir(), Runtime: rt,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := agenttest.PodManifest("pinned", agenttest.Forever) + `    resources:
      requests: {cpu: "2", memory: 64Mi}
      limits: {cpu: "2", memory: 64Mi}
`
	if err := os.WriteFile(filepath.Join(dir, "pinned.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := agenttest.NewNameSink()
	b := nodekit.NewBuilder().
		WithNodeName("node1").
		WithRuntime(rt).
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink)
	agent, err := cmwire.CPUManager(cmwire.ContainerManager(b, cm), cpus).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod Running", func() (bool, string) {
		return sink.Phases()["pinned-node1"] == v1.PodRunning, ""
	})
	pod := agent.Pods()[0]
	cgroup := filepath.Join(cgroupRoot, "kubepods", "pod"+string(pod.UID))
	if _, err := os.Stat(cgroup); err != nil {
		t.Fatalf("the Guaranteed pod's cgroup: %v", err)
	}
	cs, err := rt.ListContainers(t.Context(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	st, err := rt.ContainerStatus(t.Context(), cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	got := st.GetStatus().GetResources().GetLinux().GetCpusetCpus()
	if set, _ := cpus.GetCPUSet(string(pod.UID), "main"); got == "" || got != set.String() || strings.Contains(got, "0") {
		t.Fatalf("container cpuset %q, manager says %v: want two exclusive CPUs, never the reserved cpu 0", got, set)
	}

	if err := os.Remove(filepath.Join(dir, "pinned.yaml")); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, nil, "CPUs given back", func() (bool, string) {
		_, exclusive := cpus.GetCPUSet(string(pod.UID), "main")
		return !exclusive, ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
