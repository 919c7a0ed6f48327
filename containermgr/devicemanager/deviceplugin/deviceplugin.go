package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// kubeletSocket is the agent's registration socket in the plugin
// directory.
const kubeletSocket = "kubelet.sock"

// Config configures a Plugin. ResourceName, PluginDir and Allocate are
// required.
type Config struct {
	// ResourceName is the extended resource served, e.g. example.com/widget.
	ResourceName string
	// PluginDir is the agent's device plugin directory, holding its
	// kubelet.sock; the plugin's own socket goes there too.
	PluginDir string
	// Endpoint is the plugin's socket file name in PluginDir; default the
	// resource name with "/" as "_" plus ".sock".
	Endpoint string
	// Devices is the initial device list.
	Devices []*pluginapi.Device
	// Allocate answers an allocation of the given device IDs.
	Allocate func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error)
	// Preferred, when set, is offered as GetPreferredAllocation: it picks
	// size IDs from available, including every one of mustInclude.
	Preferred func(available, mustInclude []string, size int) []string
	// PreStart, when set, makes the agent call PreStartContainer with a
	// container's devices before it starts.
	PreStart func(ctx context.Context, ids []string) error
	// RetryPeriod is how often a failed registration is tried again
	// (besides whenever kubelet.sock is created). Default 2s.
	RetryPeriod time.Duration
	Clock       clock.WithTicker
	Logger      *zap.Logger
}

// Plugin is a device plugin server. Its methods are safe for concurrent
// use.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cfg  Config
	once lifecycle.Once

	mu      sync.Mutex
	devices []*pluginapi.Device
	// changed is closed and replaced when the device list changes.
	changed chan struct{}
	// registered is closed and replaced at every successful registration.
	registered    chan struct{}
	registrations int
}

// New checks cfg and returns a Plugin. It starts nothing.
func New(cfg Config) (*Plugin, error) {
	bad := func(f string, a ...any) (*Plugin, error) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(f, a...))
	}
	switch {
	case cfg.ResourceName == "" || !strings.Contains(cfg.ResourceName, "/"):
		return bad("ResourceName (%q) must be an extended resource name such as example.com/widget", cfg.ResourceName)
	case cfg.PluginDir == "" || !filepath.IsAbs(cfg.PluginDir):
		return bad("PluginDir (%q) must be an absolute path", cfg.PluginDir)
	case cfg.Allocate == nil:
		return bad("Allocate is required")
	case cfg.RetryPeriod < 0:
		return bad("RetryPeriod must not be negative")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = strings.ReplaceAll(cfg.ResourceName, "/", "_") + ".sock"
	}
	if strings.ContainsRune(cfg.Endpoint, '/') || cfg.Endpoint == kubeletSocket || cfg.Endpoint == "." || cfg.Endpoint == ".." {
		return bad("Endpoint (%q) must be one file name other than kubelet.sock", cfg.Endpoint)
	}
	if l := len(filepath.Join(cfg.PluginDir, cfg.Endpoint)); l > 107 {
		return bad("the socket path %q is too long (%d bytes, limit 107)", filepath.Join(cfg.PluginDir, cfg.Endpoint), l)
	}
	ids := map[string]bool{}
	for i, d := range cfg.Devices {
		if d.GetID() == "" || ids[d.GetID()] {
			return bad("Devices[%d]: empty or repeated ID %q", i, d.GetID())
		}
		ids[d.GetID()] = true
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Plugin{cfg: cfg, devices: cloneDevices(cfg.Devices), changed: make(chan struct{}), registered: make(chan struct{})}, nil
}

func cloneDevices(in []*pluginapi.Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, len(in))
	for i, d := range in {
		out[i] = &pluginapi.Device{ID: d.GetID(), Health: d.GetHealth(), Topology: d.GetTopology()}
		if out[i].Health == "" {
			out[i].Health = pluginapi.Healthy
		}
	}
	return out
}

// SocketPath is the plugin's own socket.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.PluginDir, p.cfg.Endpoint) }

// Registered returns a channel closed at the next successful
// registration; Registrations counts them.
func (p *Plugin) Registered() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registered
}

// Registrations is the number of successful registrations so far.
func (p *Plugin) Registrations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registrations
}

// SetDevices replaces the device list; the agent gets it at once.
func (p *Plugin) SetDevices(devs []*pluginapi.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devices = cloneDevices(devs)
	close(p.changed)
	p.changed = make(chan struct{})
}

// SetHealth sets one device's health (pluginapi.Healthy or Unhealthy).
func (p *Plugin) SetHealth(id string, healthy bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.devices, func(d *pluginapi.Device) bool { return d.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: %q", ErrUnknownDevice, id)
	}
	h := pluginapi.Unhealthy
	if healthy {
		h = pluginapi.Healthy
	}
	if p.devices[i].Health == h {
		return nil
	}
	next := cloneDevices(p.devices)
	next[i].Health = h
	p.devices = next
	close(p.changed)
	p.changed = make(chan struct{})
	return nil
}

// Devices returns the current device list.
func (p *Plugin) Devices() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cloneDevices(p.devices)
}

// Run serves the plugin on its socket and registers with the agent; it
// registers again whenever kubelet.sock is created anew (the agent
// restarted) and retries every RetryPeriod while registration fails. It
// returns nil when ctx ends, after its goroutines have exited and its
// socket is removed. See package lifecycle for the contract.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.once.Start(); err != nil {
		return err
	}
	if err := os.MkdirAll(p.cfg.PluginDir, 0o750); err != nil {
		return fmt.Errorf("deviceplugin: plugin directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("deviceplugin: watch %s: %w", p.cfg.PluginDir, err)
	}
	defer w.Close()
	if err := w.Add(p.cfg.PluginDir); err != nil {
		return fmt.Errorf("deviceplugin: watch %s: %w", p.cfg.PluginDir, err)
	}
	sock := p.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deviceplugin: remove stale socket: %w", err)
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("deviceplugin: listen on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveErr <- srv.Serve(lis)
	}()
	defer func() {
		srv.Stop()
		wg.Wait()
		_ = os.Remove(sock)
	}()

	registered := p.register(ctx)
	retry := p.cfg.Clock.NewTicker(p.cfg.RetryPeriod)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveErr:
			return fmt.Errorf("deviceplugin: serve: %w", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case filepath.Base(ev.Name) == kubeletSocket && ev.Has(fsnotify.Create):
				p.cfg.Logger.Info("agent socket created; registering again")
				registered = p.register(ctx)
			case filepath.Clean(ev.Name) == sock && ev.Has(fsnotify.Remove):
				p.cfg.Logger.Warn("plugin socket removed")
			}
		case err, ok := <-w.Errors:
			if ok {
				p.cfg.Logger.Warn("watching the plugin directory", zap.Error(err))
			}
		case <-retry.C():
			if !registered {
				registered = p.register(ctx)
			}
		}
	}
}

// register registers with the agent once; it reports success.
func (p *Plugin) register(ctx context.Context) bool {
	kubelet := filepath.Join(p.cfg.PluginDir, kubeletSocket)
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.cfg.Logger.Warn("registration", zap.Error(err))
		return false
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(cctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.Endpoint,
		ResourceName: p.cfg.ResourceName,
		Options:      p.options(),
	})
	if err != nil {
		p.cfg.Logger.Info("registration failed; will retry", zap.String("resource", p.cfg.ResourceName), zap.Error(err))
		return false
	}
	p.mu.Lock()
	p.registrations++
	close(p.registered)
	p.registered = make(chan struct{})
	p.mu.Unlock()
	p.cfg.Logger.Info("registered with the agent", zap.String("resource", p.cfg.ResourceName))
	return true
}

func (p *Plugin) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{
		PreStartRequired:                p.cfg.PreStart != nil,
		GetPreferredAllocationAvailable: p.cfg.Preferred != nil,
	}
}

// GetDevicePluginOptions implements the device plugin API.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.options(), nil
}

// ListAndWatch sends the device list now and at every change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		devs, changed := p.devices, p.changed
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation implements the device plugin API with
// Config.Preferred.
func (p *Plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	out := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range r.GetContainerRequests() {
		var ids []string
		if p.cfg.Preferred != nil {
			ids = p.cfg.Preferred(cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs(), int(cr.GetAllocationSize()))
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

// Allocate implements the device plugin API with Config.Allocate.
func (p *Plugin) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range r.GetContainerRequests() {
		resp, err := p.cfg.Allocate(ctx, cr.GetDevicesIds())
		if err != nil {
			return nil, err
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

// PreStartContainer implements the device plugin API with Config.PreStart.
func (p *Plugin) PreStartContainer(ctx context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if p.cfg.PreStart != nil {
		if err := p.cfg.PreStart(ctx, r.GetDevicesIds()); err != nil {
			return nil, err
		}
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}
