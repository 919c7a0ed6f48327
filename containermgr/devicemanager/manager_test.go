package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{}, "PluginDir is required"},
		{"relative", Config{PluginDir: "device-plugins"}, "absolute"},
		{"long", Config{PluginDir: "/" + strings.Repeat("d", 110)}, "too long"},
		{"negative grace", Config{PluginDir: "/x", GracePeriod: -1}, "negative"},
	} {
		_, err := New(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig naming %q", tc.name, err, tc.want)
		}
	}
}

func TestRegistrationAndCapacity(t *testing.T) {
	dir := shortDir(t)
	m := run(t, newManager(t, dir, nil))
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatalf("Register: %v", err)
	}
	waitFor(t, m.Manager, "3 widgets", hasCounts(m.Manager, widget, 3, 3))
	healthy, unhealthy, ok := m.Devices(widget)
	if !ok || !slices.Equal(healthy, []string{"w0", "w1", "w2"}) || len(unhealthy) != 0 {
		t.Fatalf("Devices = %v %v %v", healthy, unhealthy, ok)
	}
}

func TestRegistrationRefused(t *testing.T) {
	dir := shortDir(t)
	m := run(t, newManager(t, dir, nil))
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	err := p.register(t, m.SocketPath(), "v1alpha")
	if err == nil || !strings.Contains(err.Error(), "unsupported device plugin API version") || !strings.Contains(err.Error(), "v1alpha") {
		t.Fatalf("Register with v1alpha = %v, want the version refused", err)
	}
	for _, res := range []string{"widget", "kubernetes.io/widget", "example.com/bad name"} {
		p.resource = res
		if err := p.register(t, m.SocketPath(), pluginapi.Version); err == nil || !strings.Contains(err.Error(), "invalid registration") {
			t.Errorf("Register %q = %v, want refused", res, err)
		}
	}
	p.resource = widget
	for _, ep := range []string{"../x.sock", "..", "sub/x.sock", SocketName} {
		p.endpoint = ep
		if err := p.register(t, m.SocketPath(), pluginapi.Version); err == nil || !strings.Contains(err.Error(), "one file name") {
			t.Errorf("Register with endpoint %q = %v, want refused", ep, err)
		}
	}
	if c, _ := m.DeviceCapacity(); len(c) != 0 {
		t.Fatalf("capacity after refused registrations = %v, want none", c)
	}
}

func TestListAndWatchUpdates(t *testing.T) {
	dir := shortDir(t)
	m := run(t, newManager(t, dir, nil))
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "3 healthy", hasCounts(m.Manager, widget, 3, 3))
	devs := devices(3, pluginapi.Healthy)
	devs[1].Health = pluginapi.Unhealthy
	p.setDevices(devs)
	waitFor(t, m.Manager, "one unhealthy", hasCounts(m.Manager, widget, 3, 2))
	_, unhealthy, _ := m.Devices(widget)
	if !slices.Equal(unhealthy, []string{"w1"}) {
		t.Fatalf("unhealthy = %v, want [w1]", unhealthy)
	}
	p.setDevices(devs[:1])
	waitFor(t, m.Manager, "two removed", hasCounts(m.Manager, widget, 1, 1))
	p.setDevices(devices(4, pluginapi.Healthy))
	waitFor(t, m.Manager, "four back", hasCounts(m.Manager, widget, 4, 4))
}

func registered(t *testing.T, n int, opts *pluginapi.DevicePluginOptions) (*running, *fakePlugin, string) {
	t.Helper()
	dir := shortDir(t)
	m := run(t, newManager(t, dir, nil))
	p := startPlugin(t, dir, "w.sock", widget, n, opts)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "devices", hasCounts(m.Manager, widget, int64(n), int64(n)))
	return m, p, dir
}

func TestAdmissionRefusesTooFew(t *testing.T) {
	m, _, _ := registered(t, 3, nil)
	a := podWith("a", 2)
	if ok, reason, msg := m.Admit(a, nil); !ok {
		t.Fatalf("pod a rejected: %s %s", reason, msg)
	}
	b := podWith("b", 2)
	ok, reason, msg := m.Admit(b, []*v1.Pod{a})
	if ok || reason != "UnexpectedAdmissionError" ||
		msg != "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected" {
		t.Fatalf("pod b: ok=%v reason=%q msg=%q", ok, reason, msg)
	}
	if got := m.ContainerDevices("b", "c0"); got != nil {
		t.Fatalf("rejected pod holds %v", got)
	}
	// A pod asking for one fits the last free device.
	if ok, reason, msg := m.Admit(podWith("c", 1), []*v1.Pod{a}); !ok {
		t.Fatalf("pod c rejected: %s %s", reason, msg)
	}
	// Unhealthy devices are not allocated.
	m2, p2, _ := registered(t, 2, nil)
	devs := devices(2, pluginapi.Unhealthy)
	p2.setDevices(devs)
	waitFor(t, m2.Manager, "unhealthy", hasCounts(m2.Manager, widget, 2, 0))
	ok, reason, msg = m2.Admit(podWith("d", 1), nil)
	if ok || reason != ReasonUnexpectedAdmissionError || !strings.Contains(msg, "no healthy devices present") {
		t.Fatalf("pod d on unhealthy devices: %v %q %q", ok, reason, msg)
	}
}

func TestRequestsOfUnknownResourcesIgnored(t *testing.T) {
	m := run(t, newManager(t, shortDir(t), nil))
	if ok, reason, msg := m.Admit(podWith("a", 5), nil); !ok {
		t.Fatalf("pod asking for an unregistered resource rejected: %s %s", reason, msg)
	}
}

func TestAllocationPreferredAndCRIConfig(t *testing.T) {
	m, p, _ := registered(t, 4, &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: true})
	p.preferred = func(avail []string, size int) []string { return []string{"w3", "w1"}[:size] }
	pod := podWith("a", 2)
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "WIDGETS", Value: "mine"}}
	if ok, reason, msg := m.Admit(pod, nil); !ok {
		t.Fatalf("rejected: %s %s", reason, msg)
	}
	if got := m.ContainerDevices("a", "c0")[widget]; !slices.Equal(got, []string{"w1", "w3"}) {
		t.Fatalf("allocated %v, want the preferred [w1 w3]", got)
	}
	if calls := p.allocCalls(); len(calls) != 1 || !slices.Equal(calls[0], []string{"w3", "w1"}) {
		t.Fatalf("Allocate calls = %v", calls)
	}
	cfg := &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "WIDGETS", Value: []byte("mine")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/var/data"}},
		Annotations: map[string]string{"io.kubernetes.container.hash": "1"},
	}
	if err := m.ApplyContainerDevices(context.Background(), pod, &pod.Spec.Containers[0], cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Envs) != 2 || cfg.Envs[0].Key != "WIDGETS" || string(cfg.Envs[0].Value) != "w3,w1" || string(cfg.Envs[1].Value) != "mine" {
		t.Fatalf("envs = %v: the plugin's first, the container's own last (it wins)", cfg.Envs)
	}
	if len(cfg.Mounts) != 3 || cfg.Mounts[0].ContainerPath != "/widgets/w3" || !cfg.Mounts[0].Readonly || cfg.Mounts[2].ContainerPath != "/data" {
		t.Fatalf("mounts = %v", cfg.Mounts)
	}
	if len(cfg.Devices) != 2 || cfg.Devices[0].ContainerPath != "/dev/w3" || cfg.Devices[0].HostPath != "/dev/null" || cfg.Devices[0].Permissions != "rw" {
		t.Fatalf("devices = %v", cfg.Devices)
	}
	if cfg.Annotations["widget.example.com/ids"] != "w3,w1" || cfg.Annotations["io.kubernetes.container.hash"] != "1" {
		t.Fatalf("annotations = %v", cfg.Annotations)
	}
	if len(cfg.CDIDevices) != 2 || cfg.CDIDevices[0].Name != "example.com/widget=w3" {
		t.Fatalf("CDI devices = %v", cfg.CDIDevices)
	}
	p.mu.Lock()
	preStart, prefs := p.preStart, p.prefs
	p.mu.Unlock()
	if len(preStart) != 1 || !slices.Equal(sorted(preStart[0]), []string{"w1", "w3"}) || prefs != 1 {
		t.Fatalf("PreStartContainer calls %v, GetPreferredAllocation calls %d", preStart, prefs)
	}
	// A container without devices gets nothing.
	other := &runtimeapi.ContainerConfig{}
	c := v1.Container{Name: "plain"}
	if err := m.ApplyContainerDevices(context.Background(), pod, &c, other); err != nil || len(other.Envs)+len(other.Devices) != 0 {
		t.Fatalf("plain container: %v %v", err, other)
	}
}

func TestInitContainerDevicesReused(t *testing.T) {
	m, _, _ := registered(t, 3, nil)
	pod := podWith("a", 2)
	pod.Spec.InitContainers = []v1.Container{podWith("x", 2).Spec.Containers[0]}
	pod.Spec.InitContainers[0].Name = "init"
	if ok, reason, msg := m.Admit(pod, nil); !ok {
		t.Fatalf("rejected: %s %s", reason, msg)
	}
	initDevs, appDevs := m.ContainerDevices("a", "init")[widget], m.ContainerDevices("a", "c0")[widget]
	if len(initDevs) != 2 || !slices.Equal(initDevs, appDevs) {
		t.Fatalf("init %v, app %v: the app container should reuse the init container's devices", initDevs, appDevs)
	}
	if ok, _, msg := m.Admit(podWith("b", 1), []*v1.Pod{pod}); !ok {
		t.Fatalf("one device should be left: %s", msg)
	}
}

func TestTerminatedPodsFreeDevices(t *testing.T) {
	m, _, _ := registered(t, 2, nil)
	a := podWith("a", 2)
	if ok, _, _ := m.Admit(a, nil); !ok {
		t.Fatal("a rejected")
	}
	if ok, _, _ := m.Admit(podWith("b", 2), []*v1.Pod{a}); ok {
		t.Fatal("b admitted while a holds every device")
	}
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if ok, _, msg := m.Admit(podWith("b", 2), nil); !ok {
		t.Fatalf("b rejected after a ended: %s", msg)
	}
}

func TestReconcileFreesGonePods(t *testing.T) {
	dir := shortDir(t)
	mgr, err := New(Config{PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	var active []*v1.Pod
	if err := mgr.Start(context.Background(), func() []*v1.Pod { return active }, func() bool { return ready }); err != nil {
		t.Fatal(err)
	}
	m := run(t, mgr)
	p := startPlugin(t, dir, "w.sock", widget, 2, nil)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "devices", hasCounts(m.Manager, widget, 2, 2))
	a := podWith("a", 2)
	if ok, _, _ := m.Admit(a, nil); !ok {
		t.Fatal("a rejected")
	}
	for i := 0; i < 3; i++ {
		if err := m.Reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	if m.ContainerDevices("a", "c0") == nil {
		t.Fatal("devices freed before the sources are ready")
	}
	ready, active = true, []*v1.Pod{a}
	for i := 0; i < 3; i++ {
		_ = m.Reconcile()
	}
	if m.ContainerDevices("a", "c0") == nil {
		t.Fatal("devices of an active pod freed")
	}
	active = nil
	_ = m.Reconcile()
	if m.ContainerDevices("a", "c0") == nil {
		t.Fatal("devices freed after one pass without the pod")
	}
	if err := m.Reconcile(); err != nil {
		t.Fatal(err)
	}
	if got := m.ContainerDevices("a", "c0"); got != nil {
		t.Fatalf("gone pod still holds %v", got)
	}
	if ok, _, msg := m.Admit(podWith("b", 2), nil); !ok {
		t.Fatalf("b rejected after a was freed: %s", msg)
	}
}

func TestRestartWithCheckpoint(t *testing.T) {
	dir := shortDir(t)
	m1 := run(t, newManager(t, dir, nil))
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	if err := p.register(t, m1.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m1.Manager, "devices", hasCounts(m1.Manager, widget, 3, 3))
	a := podWith("a", 2)
	if ok, _, msg := m1.Admit(a, nil); !ok {
		t.Fatal(msg)
	}
	held := m1.ContainerDevices("a", "c0")[widget]
	m1.stop()

	m2 := newManager(t, dir, nil)
	if c, al := counts(m2, widget); c != 3 || al != 0 {
		t.Fatalf("restored resource: capacity %d allocatable %d, want 3 and 0 until the plugin registers", c, al)
	}
	r2 := run(t, m2)
	// Before the plugin is back, the running pod is admitted again with its devices.
	if ok, _, msg := r2.Admit(a, nil); !ok {
		t.Fatalf("restored pod rejected: %s", msg)
	}
	if got := r2.ContainerDevices("a", "c0")[widget]; !slices.Equal(got, held) {
		t.Fatalf("after restart a holds %v, want %v", got, held)
	}
	if err := p.register(t, r2.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r2.Manager, "plugin back", hasCounts(r2.Manager, widget, 3, 3))
	if ok, _, _ := r2.Admit(podWith("b", 2), []*v1.Pod{a}); ok {
		t.Fatal("b admitted: a's devices allocated twice")
	}
	if ok, _, msg := r2.Admit(podWith("c", 1), []*v1.Pod{a}); !ok {
		t.Fatalf("c rejected: %s", msg)
	}
	c := r2.ContainerDevices("c", "c0")[widget]
	if len(c) != 1 || slices.Contains(held, c[0]) {
		t.Fatalf("c got %v, overlapping a's %v", c, held)
	}
	// The allocate response survived too.
	cfg := &runtimeapi.ContainerConfig{}
	if err := r2.ApplyContainerDevices(context.Background(), a, &a.Spec.Containers[0], cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Envs) != 1 || string(cfg.Envs[0].Value) != strings.Join(p.allocCalls()[0], ",") {
		t.Fatalf("restored envs = %v", cfg.Envs)
	}
}

func TestPluginRestartReregisters(t *testing.T) {
	m, p, _ := registered(t, 3, nil)
	p.stop()
	waitFor(t, m.Manager, "plugin gone: devices unhealthy", hasCounts(m.Manager, widget, 3, 0))
	p.serve(t)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "plugin back", hasCounts(m.Manager, widget, 3, 3))
	if ok, _, msg := m.Admit(podWith("a", 3), nil); !ok {
		t.Fatalf("rejected after re-registration: %s", msg)
	}
}

func TestPluginGonePastGracePeriod(t *testing.T) {
	dir := shortDir(t)
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	m := run(t, newManager(t, dir, clk))
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "devices", hasCounts(m.Manager, widget, 3, 3))
	p.stop()
	waitFor(t, m.Manager, "unhealthy", hasCounts(m.Manager, widget, 3, 0))
	clk.Step(DefaultGracePeriod - time.Second)
	if c, a := counts(m.Manager, widget); c != 3 || a != 0 {
		t.Fatalf("within the grace period: %d/%d, want 3/0", c, a)
	}
	clk.Step(time.Second)
	c, a := m.DeviceCapacity()
	cq, aq := c[widget], a[widget]
	if _, ok := c[widget]; !ok || cq.Value() != 0 || aq.Value() != 0 {
		t.Fatalf("past the grace period: %v / %v, want widget 0 in both", c, a)
	}
	if _, _, ok := m.Devices(widget); ok {
		t.Fatal("resource still known past the grace period")
	}
	// A pod asking for it is refused as the kubelet's resource fit does.
	ok, reason, msg := m.Admit(podWith("late", 1, 2), nil)
	if ok || reason != "OutOfexample.com/widget" || msg != "Node didn't have enough resource: example.com/widget, requested: 3, used: 0, capacity: 0" {
		t.Fatalf("pod for a removed resource: %v %q %q", ok, reason, msg)
	}
	// The checkpoint no longer names it: a restart does not bring it back.
	m.stop()
	m2 := newManager(t, dir, clk)
	if c, _ := m2.DeviceCapacity(); len(c) != 0 {
		t.Fatalf("after restart: %v", c)
	}
}

func TestCorruptCheckpointSetAside(t *testing.T) {
	dir := shortDir(t)
	if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir, nil)
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err != nil {
		t.Fatalf("corrupt checkpoint not set aside: %v", err)
	}
	if c, _ := m.DeviceCapacity(); len(c) != 0 {
		t.Fatalf("state from a corrupt file: %v", c)
	}
	// A fresh file was written and reads back.
	if _, err := newManagerErr(dir); err != nil {
		t.Fatalf("restart after rebuild: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt.1")); err == nil {
		t.Fatal("the rebuilt checkpoint was set aside again")
	}
}

func newManagerErr(dir string) (*Manager, error) {
	m, err := New(Config{PluginDir: dir, Clock: clock.RealClock{}})
	if err != nil {
		return nil, err
	}
	return m, m.Start(context.Background(), nil, nil)
}

func TestDecodeStateRefusesBadContent(t *testing.T) {
	for name, s := range map[string]string{
		"version":    `{"version":2,"entries":[],"registered":{}}`,
		"unknown":    `{"version":1,"x":1}`,
		"resource":   `{"version":1,"entries":[],"registered":{"widget":["a"]}}`,
		"dup device": `{"version":1,"entries":[],"registered":{"example.com/w":["a","a"]}}`,
		"two pods":   `{"version":1,"entries":[{"podUID":"p1","container":"c","resource":"example.com/w","deviceIDs":["a"]},{"podUID":"p2","container":"c","resource":"example.com/w","deviceIDs":["a"]}]}`,
		"no ids":     `{"version":1,"entries":[{"podUID":"p1","container":"c","resource":"example.com/w","deviceIDs":[]}]}`,
		"bad resp":   `{"version":1,"entries":[{"podUID":"p1","container":"c","resource":"example.com/w","deviceIDs":["a"],"allocResp":"/w=="}]}`,
	} {
		if _, err := decodeState([]byte(s)); !errors.Is(err, ErrCorruptState) {
			t.Errorf("%s: decodeState = %v, want ErrCorruptState", name, err)
		}
	}
}

func TestRunTwiceAndBeforeStart(t *testing.T) {
	m, err := New(Config{PluginDir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Run before Start = %v", err)
	}
	if err := m.Run(context.Background()); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	dir := shortDir(t)
	reg := prometheus.NewRegistry()
	mgr, err := New(Config{PluginDir: dir, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	m := run(t, mgr)
	p := startPlugin(t, dir, "w.sock", widget, 3, nil)
	if err := p.register(t, m.SocketPath(), pluginapi.Version); err != nil {
		t.Fatal(err)
	}
	devs := devices(3, pluginapi.Healthy)
	devs[0].Health = pluginapi.Unhealthy
	p.setDevices(devs)
	waitFor(t, m.Manager, "one unhealthy", hasCounts(m.Manager, widget, 3, 2))
	m.Admit(podWith("a", 2), nil)
	m.Admit(podWith("b", 1), nil)
	want := `
# HELP nodekit_device_manager_devices Devices of each registered resource, by health.
# TYPE nodekit_device_manager_devices gauge
nodekit_device_manager_devices{health="Healthy",resource="example.com/widget"} 2
nodekit_device_manager_devices{health="Unhealthy",resource="example.com/widget"} 1
# HELP nodekit_device_manager_pod_admission_errors_total Pods rejected because their devices could not be allocated.
# TYPE nodekit_device_manager_pod_admission_errors_total counter
nodekit_device_manager_pod_admission_errors_total 1
# HELP nodekit_device_manager_pod_admissions_total Pods whose devices the device manager allocated at admission.
# TYPE nodekit_device_manager_pod_admissions_total counter
nodekit_device_manager_pod_admissions_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{PluginDir: dir, Registerer: reg}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("second manager on the same registry: %v", err)
	}
}

// TestHostileDeviceLists: empty and repeated IDs are dropped, an unknown
// health counts as unhealthy, and a list is capped at
// MaxDevicesPerResource.
func TestHostileDeviceLists(t *testing.T) {
	m, p, _ := registered(t, 1, nil)
	p.setDevices([]*pluginapi.Device{
		{ID: "", Health: pluginapi.Healthy}, {ID: "a", Health: pluginapi.Healthy}, {ID: "a", Health: pluginapi.Healthy},
		{ID: "b", Health: "Maybe"},
	})
	waitFor(t, m.Manager, "a healthy, b unhealthy", hasCounts(m.Manager, widget, 2, 1))
	many := make([]*pluginapi.Device, MaxDevicesPerResource+100)
	for i := range many {
		many[i] = &pluginapi.Device{ID: fmt.Sprintf("d%d", i), Health: pluginapi.Healthy}
	}
	p.setDevices(many)
	waitFor(t, m.Manager, "capped", hasCounts(m.Manager, widget, MaxDevicesPerResource, MaxDevicesPerResource))
}
