//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/kuberuntime"
)

// TestWrongCgroupDriverOnContainerd2: an agent whose container manager is
// configured with the systemd driver, on containerd 2.x with the cgroupfs
// driver (SystemdCgroup = false, what hack/containerd.sh configures and CRI
// RuntimeConfig reports), uses cgroupfs as the kubelet does: the pod cgroup
// is <top>/burstable/pod<uid>, the container runs in it, and the agent says
// so in exactly one warning. It also follows containerd 2.x's container
// events by default (the evented PLEG is in use). containerd 1.6 reports no
// driver (the configured one would stay, and runc would reject a systemd
// slice name), so the test runs only with NODEKIT_CONTAINERD=2.
func TestWrongCgroupDriverOnContainerd2(t *testing.T) {
	if os.Getenv("NODEKIT_CONTAINERD") != "2" {
		t.Skip("needs containerd 2.x (NODEKIT_CONTAINERD=2): containerd 1.6 has no CRI RuntimeConfig")
	}
	requireCgroupV1(t)
	e := volumeEnv(t)
	mgr, top := e.cgroupManager(t, "kubepods-e2e-", containermgr.Config{CgroupDriver: containermgr.DriverSystemd}, false)

	dir, manifests := agentDirs(t)
	writeManifest(t, manifests, "cgdriver", cgroupPodManifest("cgdriver", e.busybox, `    resources:
      requests: {cpu: 100m, memory: 32Mi}
`))
	core, logs := observer.New(zapcore.InfoLevel)
	agent, err := cmwire.ContainerManager(e.builder(dir, manifests).WithLogger(zap.New(core)), mgr).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	name := "cgdriver-" + nodeName
	waitFor(t, 90*time.Second, "the pod running", func() (bool, string) {
		return e.running(t)[name] != nil, "not running"
	})
	if got := mgr.CgroupDriver(); got != containermgr.DriverCgroupfs {
		t.Fatalf("container manager driver %s, want the runtime's cgroupfs", got)
	}
	c := e.running(t)[name]
	uid := c.GetLabels()[kuberuntime.LabelPodUID]
	podDir := "/" + top + "/burstable/pod" + uid
	if !cgExists("cpu", podDir) {
		t.Fatalf("no cgroupfs pod cgroup cpu%s", podDir)
	}
	if cgExists("cpu", top+".slice") {
		t.Errorf("a systemd slice cpu/%s.slice was made", top)
	}
	cgs := procCgroups(t, e.containerPID(t, c.Id))
	if !strings.HasPrefix(cgs["cpu"], podDir+"/") {
		t.Errorf("the container is in cpu cgroup %q, not under %s", cgs["cpu"], podDir)
	}
	warns := logs.FilterMessageSnippet("cgroup driver differs").All()
	if len(warns) != 1 || warns[0].Level != zapcore.WarnLevel ||
		warns[0].ContextMap()["configured"] != "systemd" || warns[0].ContextMap()["runtime"] != "cgroupfs" {
		t.Fatalf("want one warning naming systemd (configured) and cgroupfs (runtime), got %d: %v", len(warns), warns)
	}
	if ev := agent.EventedPLEG(); ev == nil || !ev.InUse() {
		t.Errorf("the agent does not follow containerd 2.x's container events (evented PLEG %v)", ev)
	}

	if err := os.Remove(filepath.Join(manifests, "cgdriver.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the pod cgroup removed", func() (bool, string) {
		return !cgExists("cpu", podDir), fmt.Sprintf("cpu%s still there", podDir)
	})
}
