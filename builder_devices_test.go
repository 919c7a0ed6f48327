package nodekit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/containermgr/devicemanager/deviceplugin"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// TestWithDeviceManager: the one-call wiring serves the registration
// socket, reports the plugin's widgets as the agent's device capacity,
// creates a pod's container with its devices (mounts and annotations in
// the CRI config), rejects a pod that wants more than is left with the
// kubelet's reason, and frees the devices once the pod has stopped.
func TestWithDeviceManager(t *testing.T) {
	defer goleak.VerifyNone(t)
	pluginDir, err := os.MkdirTemp("", "nkdev")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pluginDir)
	dm, err := devicemanager.New(devicemanager.Config{PluginDir: pluginDir})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fake.New(fake.Config{Images: []string{"busybox:1"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	withWidgets := func(name string, n string) string {
		return agenttest.PodManifest(name, agenttest.Forever) + "    resources:\n      limits: {example.com/widget: \"" + n + "\"}\n"
	}
	sink := agenttest.NewNameSink()
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithRuntime(rt).
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithDeviceManager(dm).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	<-dm.Ready()
	plugin, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: "example.com/widget", PluginDir: pluginDir,
		Devices: []*pluginapi.Device{{ID: "w0"}, {ID: "w1"}, {ID: "w2"}},
		Allocate: func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			resp := &pluginapi.ContainerAllocateResponse{Annotations: map[string]string{"widgets": strings.Join(ids, ",")}}
			for _, id := range ids {
				resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/widgets/" + id, HostPath: "/dev/null"})
			}
			return resp, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(t.Context())
	pdone := make(chan error, 1)
	go func() { pdone <- plugin.Run(pctx) }()
	defer func() {
		pcancel()
		if err := <-pdone; err != nil {
			t.Errorf("plugin: %v", err)
		}
	}()
	agenttest.WaitUntil(t, 20*time.Second, nil, "3 widgets", func() (bool, string) {
		c, a := agent.DeviceCapacity()
		cq, aq := c["example.com/widget"], a["example.com/widget"]
		return cq.Value() == 3 && aq.Value() == 3, ""
	})
	// The pods come once the devices are known (a pod admitted before its
	// resource is registered gets none, as with the kubelet).
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(withWidgets("a", "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod a Running", func() (bool, string) {
		return sink.Phases()["a-node1"] == v1.PodRunning, ""
	})
	cs, err := rt.ListContainers(t.Context(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	st, err := rt.ContainerStatus(t.Context(), cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for _, p := range agent.Pods() {
		if p.Name == "a-node1" {
			uid = string(p.UID)
		}
	}
	held := dm.ContainerDevices(uid, "main")["example.com/widget"]
	if got := st.GetStatus().GetAnnotations()["widgets"]; len(held) != 2 || got == "" || !strings.Contains(got, held[0]) {
		t.Fatalf("container annotation widgets=%q, manager says %v", got, held)
	}
	var widgetMounts int
	for _, m := range st.GetStatus().GetMounts() {
		if strings.HasPrefix(m.ContainerPath, "/widgets/") {
			widgetMounts++
		}
	}
	if widgetMounts != 2 {
		t.Fatalf("container mounts %v: want the 2 widgets", st.GetStatus().GetMounts())
	}

	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(withWidgets("b", "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "pod b rejected", func() (bool, string) {
		b, _ := sink.Status("b-node1")
		return b.Phase == v1.PodFailed && b.Reason == "UnexpectedAdmissionError" &&
			strings.Contains(b.Message, "requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1"), b.Reason + " " + b.Message
	})

	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	agenttest.WaitUntil(t, 20*time.Second, nil, "a's devices freed", func() (bool, string) {
		return dm.ContainerDevices(uid, "main") == nil, ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestWithDeviceManagerMisuse(t *testing.T) {
	dir, err := os.MkdirTemp("", "nkdev")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dm, err := devicemanager.New(devicemanager.Config{PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var typedNil *devicemanager.Manager
	for name, b := range map[string]*nodekit.Builder{
		"nil":       nodekit.NewBuilder().WithFakeRuntime().WithDeviceManager(nil),
		"typed nil": nodekit.NewBuilder().WithFakeRuntime().WithDeviceManager(typedNil),
		"twice":     nodekit.NewBuilder().WithFakeRuntime().WithDeviceManager(dm).WithDeviceManager(dm),
	} {
		if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "WithDeviceManager") {
			t.Errorf("%s: Build = %v, want an error naming WithDeviceManager", name, err)
		}
	}
}
