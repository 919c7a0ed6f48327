package managers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/topology"
	"github.com/nodekit/nodekit/kubeletconfig"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func loaded(t *testing.T, doc string) *kc.KubeletConfiguration {
	t.Helper()
	c, err := kubeletconfig.Decode([]byte(header + doc))
	if err != nil {
		t.Fatal(err)
	}
	kubeletconfig.SetDefaults(c)
	return c
}

func guaranteed(name, cpu, memory string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default"},
"spec":{"containers":[{"name":"main","image":"busybox:1","command":["sleep","3600"],
"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`, name, cpu, memory, cpu, memory)
}

// A configuration's cgroup fields make a container manager whose
// allocatable holds back kubeReserved and the hard eviction threshold (a
// pod over it is refused OutOfmemory), a static CPU manager (a Guaranteed
// pod gets exclusive CPUs, never the reserved CPU 0), and eviction.
func TestPartWiresTheManagers(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pod := range map[string]string{"fits": guaranteed("fits", "2", "500Mi"), "toobig": guaranteed("toobig", "1", "900Mi")} {
		if err := os.WriteFile(filepath.Join(manifests, name+".json"), []byte(pod), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := loaded(t, fmt.Sprintf(`staticPodPath: %s
kubeReserved: {memory: 100Mi}
evictionHard: {memory.available: 100Mi}
cpuManagerPolicy: static
reservedSystemCPUs: "0"
cpuManagerReconcilePeriod: 5s
imageGCHighThresholdPercent: 90
`, manifests))
	topo, err := topology.Synthetic(1, 4, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	cgroups := filepath.Join(dir, "cgroup")
	if err := os.Mkdir(cgroups, 0o755); err != nil {
		t.Fatal(err)
	}
	var built Built
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").WithRootDir(filepath.Join(dir, "root")).WithLogger(zap.NewNop())
	applied, err := kubeletconfig.Apply(b, c, kubeletconfig.Options{Parts: []kubeletconfig.Part{Part(Options{
		StateDir: filepath.Join(dir, "state"), CgroupFS: cgroups, CgroupVersion: containermgr.V2, Topology: topo, Built: &built,
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi")},
	})}})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Unsupported) != 0 {
		t.Errorf("unsupported %v: the part maps them", applied.Unsupported)
	}
	a, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wait, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	pod, _, err := a.WaitForPod(wait, "default", "fits-node1", nodekit.PodRunning)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := a.WaitForPod(wait, "default", "toobig-node1", nodekit.PodPhase(v1.PodFailed))
	if err != nil {
		t.Fatal(err)
	}
	// 1Gi - 100Mi reserved - 100Mi threshold = 824Mi; 500Mi used.
	if st.Reason != "OutOfmemory" || !strings.Contains(st.Message, "capacity: 864026624") {
		t.Errorf("the 900Mi pod: %s %s", st.Reason, st.Message)
	}
	if _, err := os.Stat(filepath.Join(cgroups, "kubepods", "pod"+string(pod.UID))); err != nil {
		t.Errorf("the Guaranteed pod's cgroup: %v", err)
	}
	cs, err := a.FakeRuntime().ListContainers(t.Context(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers %v %v", cs, err)
	}
	cst, err := a.FakeRuntime().ContainerStatus(t.Context(), cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if set := cst.GetStatus().GetResources().GetLinux().GetCpusetCpus(); set == "" || strings.Contains(set, "0") {
		t.Errorf("container cpuset %q: want two exclusive CPUs, not the reserved 0", set)
	}
	if built.Eviction.Manager == nil || a.Eviction() == nil {
		t.Error("no eviction manager")
	}
	if r := built.Reservation()[v1.ResourceMemory]; r.Value() != 200<<20 {
		t.Errorf("memory reservation %s, want 200Mi (100Mi reserved + 100Mi threshold)", r.String())
	}
}

func TestPartCannotHonour(t *testing.T) {
	c := loaded(t, "cgroupRoot: /custom\nenforceNodeAllocatable: [pods, kube-reserved]\nkubeReservedCgroup: /kube\nkubeReserved: {cpu: lots}\ncpuManagerPolicy: static\n")
	_, err := kubeletconfig.Apply(nodekit.NewBuilder(), c, kubeletconfig.Options{Parts: []kubeletconfig.Part{Part(Options{})}})
	for _, want := range []string{`cgroupRoot: "/custom"`, `enforceNodeAllocatable: "kube-reserved"`, `kubeReserved: cpu: "lots"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	if !errors.Is(err, kubeletconfig.ErrCannotHonour) {
		t.Errorf("not ErrCannotHonour: %v", err)
	}
	// A static policy needs a state directory.
	c = loaded(t, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
	topo, _ := topology.Synthetic(1, 2, 1, 1)
	_, err = kubeletconfig.Apply(nodekit.NewBuilder(), c, kubeletconfig.Options{Parts: []kubeletconfig.Part{Part(Options{Topology: topo})}})
	if err == nil || !strings.Contains(err.Error(), "StateDir is required") {
		t.Errorf("no state dir: %v", err)
	}
}
