package cmwire_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// TestCgroupDriverFromRuntime: an agent whose container manager is
// configured with the systemd driver, on a runtime that reports cgroupfs in
// CRI RuntimeConfig (containerd 2.x's default), uses cgroupfs, as the
// kubelet does, and warns exactly once; on a runtime without RuntimeConfig
// (containerd 1.6) the configured driver stays.
func TestCgroupDriverFromRuntime(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unimplemented bool
		wantDir       []string
		wantWarnings  int
	}{
		{"runtime reports cgroupfs", false, []string{"kubepods", "burstable"}, 1},
		{"runtime without RuntimeConfig", true, []string{"kubepods.slice", "kubepods-burstable.slice"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			cgroupRoot := t.TempDir()
			cm, err := containermgr.New(containermgr.Config{
				CgroupRoot:    cgroupRoot,
				CgroupVersion: containermgr.V2,
				CgroupDriver:  containermgr.DriverSystemd,
				Capacity:      v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
			})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := fake.New(fake.Config{Images: []string{"busybox:1"}, CgroupDriver: "cgroupfs", RuntimeConfigUnimplemented: tc.unimplemented})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(agenttest.PodManifest("web", agenttest.Forever)+`    resources:
      requests: {cpu: 100m, memory: 32Mi}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			sink := agenttest.NewNameSink()
			b := nodekit.NewBuilder().
				WithNodeName("node1").
				WithRuntime(rt).
				WithManifestDir(dir).
				WithRootDir(t.TempDir()).
				WithStatusSink(sink).
				WithLogger(zap.New(core))
			agent, err := cmwire.ContainerManager(b, cm).Build()
			if err != nil {
				t.Fatal(err)
			}
			stop := agenttest.StartAgent(t, agent)
			agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod Running", func() (bool, string) {
				return sink.Phases()["web-node1"] == v1.PodRunning, ""
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			pod := agent.Pods()[0]
			podDir := filepath.Join(append([]string{cgroupRoot}, tc.wantDir...)...)
			entries, _ := os.ReadDir(podDir)
			found := false
			for _, e := range entries {
				if e.IsDir() && (e.Name() == "pod"+string(pod.UID) || e.Name() == "kubepods-burstable-pod"+escapeUID(string(pod.UID))+".slice") {
					found = true
				}
			}
			if !found {
				t.Fatalf("no pod cgroup in %s (%v)", podDir, entries)
			}
			warns := logs.FilterMessageSnippet("cgroup driver differs").All()
			if len(warns) != tc.wantWarnings {
				t.Fatalf("%d cgroup driver warnings, want %d: %v", len(warns), tc.wantWarnings, warns)
			}
			if tc.wantWarnings > 0 {
				if w := warns[0]; w.Level != zapcore.WarnLevel || w.ContextMap()["configured"] != "systemd" || w.ContextMap()["runtime"] != "cgroupfs" {
					t.Fatalf("warning %v %q %v: want a Warn naming systemd (configured) and cgroupfs (runtime)", w.Level, w.Message, w.ContextMap())
				}
			}
			if got := cm.CgroupDriver(); (got == containermgr.DriverCgroupfs) == tc.unimplemented {
				t.Fatalf("container manager driver %s", got)
			}
		})
	}
}

// escapeUID spells a UID as the systemd driver does ('-' becomes '_').
func escapeUID(uid string) string {
	b := []byte(uid)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}
