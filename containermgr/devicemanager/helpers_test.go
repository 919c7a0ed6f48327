package devicemanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const widget = "example.com/widget"

// shortDir is a temp dir with a short path (unix sockets: 108 bytes).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fakePlugin is an in-process device plugin on a unix socket.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource, socket string
	// endpoint, when set, is registered instead of the socket's name.
	endpoint string
	opts     *pluginapi.DevicePluginOptions
	// preferred answers GetPreferredAllocation (nil: the first size IDs).
	preferred func(available []string, size int) []string

	mu       sync.Mutex
	devs     []*pluginapi.Device
	watchers map[chan []*pluginapi.Device]bool
	allocs   [][]string
	prefs    int
	preStart [][]string
	srv      *grpc.Server
	wg       sync.WaitGroup
}

func devices(n int, health string) []*pluginapi.Device {
	out := make([]*pluginapi.Device, n)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("w%d", i), Health: health}
	}
	return out
}

func startPlugin(t testing.TB, dir, name, res string, n int, opts *pluginapi.DevicePluginOptions) *fakePlugin {
	t.Helper()
	if opts == nil {
		opts = &pluginapi.DevicePluginOptions{}
	}
	p := &fakePlugin{resource: res, socket: filepath.Join(dir, name), opts: opts, devs: devices(n, pluginapi.Healthy),
		watchers: map[chan []*pluginapi.Device]bool{}}
	p.serve(t)
	t.Cleanup(p.stop)
	return p
}

func (p *fakePlugin) serve(t testing.TB) {
	t.Helper()
	_ = os.Remove(p.socket)
	lis, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = srv.Serve(lis)
	}()
}

func (p *fakePlugin) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	p.wg.Wait()
}

func (p *fakePlugin) register(t testing.TB, kubeletSock, version string) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep := filepath.Base(p.socket)
	if p.endpoint != "" {
		ep = p.endpoint
	}
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: version, Endpoint: ep, ResourceName: p.resource, Options: p.opts,
	}, grpc.WaitForReady(true))
	return err
}

func (p *fakePlugin) setDevices(devs []*pluginapi.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devs = devs
	for w := range p.watchers {
		w <- devs
	}
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	ch := make(chan []*pluginapi.Device, 16)
	p.mu.Lock()
	devs := p.devs
	p.watchers[ch] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	}()
	for {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case devs = <-ch:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	p.prefs++
	p.mu.Unlock()
	out := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range r.ContainerRequests {
		var ids []string
		if p.preferred != nil {
			ids = p.preferred(cr.AvailableDeviceIDs, int(cr.AllocationSize))
		} else {
			ids = cr.AvailableDeviceIDs[:cr.AllocationSize]
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		p.mu.Lock()
		p.allocs = append(p.allocs, cr.DevicesIds)
		p.mu.Unlock()
		resp := &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"WIDGETS": strings.Join(cr.DevicesIds, ",")},
			Annotations: map[string]string{"widget.example.com/ids": strings.Join(cr.DevicesIds, ",")},
		}
		for _, id := range cr.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/widgets/" + id, HostPath: "/var/widgets/" + id, ReadOnly: true})
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/" + id, HostPath: "/dev/null", Permissions: "rw"})
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: "example.com/widget=" + id})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStart = append(p.preStart, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *fakePlugin) allocCalls() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.allocs...)
}

// running is a started and running Manager.
type running struct {
	*Manager
	stop func()
}

func newManager(t testing.TB, dir string, clk clock.WithTicker) *Manager {
	t.Helper()
	m, err := New(Config{PluginDir: dir, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t testing.TB, m *Manager) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-m.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run returned %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &running{Manager: m, stop: stop}
}

// waitFor waits until cond holds, woken by the manager's changes.
func waitFor(t testing.TB, m *Manager, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		ch := m.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func counts(m *Manager, res string) (capacity, allocatable int64) {
	c, a := m.DeviceCapacity()
	cq, aq := c[v1.ResourceName(res)], a[v1.ResourceName(res)]
	return cq.Value(), aq.Value()
}

func hasCounts(m *Manager, res string, c, a int64) func() bool {
	return func() bool {
		gc, ga := counts(m, res)
		return gc == c && ga == a
	}
}

func podWith(uid string, perContainer ...int64) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID = types.UID(uid)
	pod.Name, pod.Namespace = "pod-"+uid, "default"
	for i, n := range perContainer {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name: fmt.Sprintf("c%d", i),
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				widget: *resource.NewQuantity(n, resource.DecimalSI),
			}},
		})
	}
	return pod
}
