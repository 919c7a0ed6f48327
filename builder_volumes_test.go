package nodekit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/volumemgr"
)

// TestWithVolumeManager: one call wires the volume manager: a static pod's
// emptyDir is set up under the agent's pods dir before its container starts,
// and the container gets it as a mount.
func TestWithVolumeManager(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := t.TempDir()
	dir := t.TempDir()
	manifest := strings.Replace(agenttest.PodManifest("vol", agenttest.Forever), "  containers:\n", `  volumes:
  - name: scratch
    emptyDir: {}
  containers:
`, 1) + "    volumeMounts:\n    - name: scratch\n      mountPath: /scratch\n"
	if err := os.WriteFile(filepath.Join(dir, "vol.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	vm, err := volumemgr.New(volumemgr.Config{PodsDir: filepath.Join(root, "pods")})
	if err != nil {
		t.Fatal(err)
	}
	sink := agenttest.NewNameSink()
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(root).
		WithStatusSink(sink).
		WithVolumeManager(vm).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod Running", func() (bool, string) {
		return sink.Phases()["vol-node1"] == v1.PodRunning, ""
	})
	cs, err := agent.FakeRuntime().ListContainers(t.Context(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	st, err := agent.FakeRuntime().ContainerStatus(t.Context(), cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	var m *runtimeapi.Mount
	for _, x := range st.GetStatus().GetMounts() {
		if x.ContainerPath == "/scratch" {
			m = x
		}
	}
	if m == nil {
		t.Fatalf("no /scratch mount in %v", st.GetStatus().GetMounts())
	}
	if !strings.HasPrefix(m.HostPath, filepath.Join(root, "pods")) || !strings.Contains(m.HostPath, "kubernetes.io~empty-dir") {
		t.Fatalf("mount host path %q is not the pod's emptyDir under the agent root", m.HostPath)
	}
	if fi, err := os.Stat(m.HostPath); err != nil || !fi.IsDir() {
		t.Fatalf("emptyDir %q not set up: %v", m.HostPath, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestWithVolumeManagerNil(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithVolumeManager(nil).Build()
	if err == nil || !strings.Contains(err.Error(), "WithVolumeManager") {
		t.Fatalf("Build = %v, want an error naming WithVolumeManager", err)
	}
}
