package deviceplugin_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/containermgr/devicemanager/deviceplugin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const widget = "example.com/widget"

func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// start runs fn until the test ends (or stop is called) and checks it
// returns nil.
func start(t *testing.T, fn func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func startManager(t *testing.T, dir string) (*devicemanager.Manager, func()) {
	t.Helper()
	m, err := devicemanager.New(devicemanager.Config{PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	stop := start(t, m.Run)
	<-m.Ready()
	return m, stop
}

func allocatable(m *devicemanager.Manager) int64 {
	_, a := m.DeviceCapacity()
	q := a[v1.ResourceName(widget)]
	return q.Value()
}

func waitAllocatable(t *testing.T, m *devicemanager.Manager, want int64) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		ch := m.Changed()
		if allocatable(m) == want {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("allocatable %d, want %d", allocatable(m), want)
		}
	}
}

func newPlugin(t *testing.T, dir string, n int) *deviceplugin.Plugin {
	t.Helper()
	var devs []*pluginapi.Device
	for _, id := range []string{"a", "b", "c", "d"}[:n] {
		devs = append(devs, &pluginapi.Device{ID: id})
	}
	p, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: widget, PluginDir: dir, Devices: devs,
		Allocate: func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"W": strings.Join(ids, ",")}}, nil
		},
		RetryPeriod: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPluginRegistersHealthAndAgentRestart: the plugin registers, a health
// change lowers allocatable, and a new agent on the same directory gets a
// new registration without the plugin restarting.
func TestPluginRegistersHealthAndAgentRestart(t *testing.T) {
	dir := shortDir(t)
	m1, stop1 := startManager(t, dir)
	p := newPlugin(t, dir, 3)
	first := p.Registered()
	start(t, p.Run)
	waitAllocatable(t, m1, 3)
	<-first // closed already, or at once: the manager saw the registration
	if err := p.SetHealth("b", false); err != nil {
		t.Fatal(err)
	}
	waitAllocatable(t, m1, 2)
	if err := p.SetHealth("zz", false); !errors.Is(err, deviceplugin.ErrUnknownDevice) {
		t.Fatalf("SetHealth of an unknown device = %v", err)
	}
	reg := p.Registered()
	stop1()
	m2, _ := startManager(t, dir)
	waitAllocatable(t, m2, 2)
	select {
	case <-reg:
	case <-time.After(20 * time.Second):
		t.Fatal("no second registration after the agent restarted")
	}
	if n := p.Registrations(); n < 2 {
		t.Fatalf("registrations = %d, want 2", n)
	}
}

// TestPluginWaitsForAgent: a plugin started before the agent registers
// once the agent is there.
func TestPluginWaitsForAgent(t *testing.T) {
	dir := shortDir(t)
	p := newPlugin(t, dir, 4)
	reg := p.Registered()
	start(t, p.Run)
	m, _ := startManager(t, dir)
	<-reg
	waitAllocatable(t, m, 4)
}

func TestNewValidates(t *testing.T) {
	alloc := func(context.Context, []string) (*pluginapi.ContainerAllocateResponse, error) { return nil, nil }
	for _, cfg := range []deviceplugin.Config{
		{PluginDir: "/x", Allocate: alloc},
		{ResourceName: widget, PluginDir: "rel", Allocate: alloc},
		{ResourceName: widget, PluginDir: "/x"},
		{ResourceName: widget, PluginDir: "/x", Allocate: alloc, Endpoint: "kubelet.sock"},
		{ResourceName: widget, PluginDir: "/x", Allocate: alloc, Devices: []*pluginapi.Device{{ID: "a"}, {ID: "a"}}},
	} {
		if _, err := deviceplugin.New(cfg); !errors.Is(err, deviceplugin.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
