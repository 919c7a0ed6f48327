package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/lifecycle"
)

// Manager is the device manager. Its methods are safe for concurrent use.
type Manager struct {
	cfg  Config
	fs   checkpoint.FS
	once lifecycle.Once

	ready chan struct{}
	// admitMu serialises allocations (Admit, the re-allocation of
	// ApplyContainerDevices) so that plugin calls can run without mu.
	admitMu sync.Mutex

	mu      sync.Mutex
	started bool
	// runCtx is Run's context while Run serves; nil otherwise.
	runCtx context.Context
	wg     sync.WaitGroup
	// resources: every resource a plugin registered (or the checkpoint
	// named), until its grace period after a disconnect has passed.
	resources map[string]*resourceState
	// removed: resources whose grace period passed; reported as 0 until
	// they register again.
	removed map[string]bool
	// alloc: pod UID -> container -> resource -> allocation.
	alloc map[string]map[string]map[string]*allocation
	// missing: pods holding devices that the last Reconcile did not find.
	missing map[string]bool
	// changed is closed and replaced on every change of devices.
	changed chan struct{}

	activePods   func() []*v1.Pod
	sourcesReady func() bool

	mAllocations, mAllocErrors prometheus.Counter
	mDevices                   *prometheus.GaugeVec
}

type resourceState struct {
	devices map[string]*pluginapi.Device
	ep      *endpoint // nil: known from the checkpoint only
	// stoppedAt is when the plugin went away (zero while connected).
	stoppedAt time.Time
}

func (r *resourceState) healthy() []string {
	var out []string
	for id, d := range r.devices {
		if d.Health == pluginapi.Healthy {
			out = append(out, id)
		}
	}
	return out
}

type endpoint struct {
	resource string
	socket   string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	cancel   context.CancelFunc
}

type allocation struct {
	ids  []string
	resp *pluginapi.ContainerAllocateResponse
	// restored: read from the checkpoint (the container may be running).
	restored bool
}

// New checks cfg and returns a Manager. It starts nothing and does no I/O.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:       cfg,
		fs:        checkpoint.OS{},
		ready:     make(chan struct{}),
		resources: map[string]*resourceState{},
		removed:   map[string]bool{},
		alloc:     map[string]map[string]map[string]*allocation{},
		changed:   make(chan struct{}),
		mAllocations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "device_manager", Name: "pod_admissions_total",
			Help: "Pods whose devices the device manager allocated at admission.",
		}),
		mAllocErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "device_manager", Name: "pod_admission_errors_total",
			Help: "Pods rejected because their devices could not be allocated.",
		}),
		mDevices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nodekit", Subsystem: "device_manager", Name: "devices",
			Help: "Devices of each registered resource, by health.",
		}, []string{"resource", "health"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.mAllocations, m.mAllocErrors, m.mDevices} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
			}
		}
	}
	return m, nil
}

// gaugeLocked sets the device gauges of res (removed when res is gone).
func (m *Manager) gaugeLocked(res string) {
	r := m.resources[res]
	if r == nil {
		m.mDevices.DeleteLabelValues(res, pluginapi.Healthy)
		m.mDevices.DeleteLabelValues(res, pluginapi.Unhealthy)
		return
	}
	healthy := len(r.healthy())
	m.mDevices.WithLabelValues(res, pluginapi.Healthy).Set(float64(healthy))
	m.mDevices.WithLabelValues(res, pluginapi.Unhealthy).Set(float64(len(r.devices) - healthy))
}

// Ready is closed once Run serves the registration socket.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Changed returns a channel closed at the next change of any resource's
// devices (a registration, a device list, a disconnect, an expiry). Wait
// on it, then call Changed again.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// SocketPath is the registration socket plugins dial.
func (m *Manager) SocketPath() string { return filepath.Join(m.cfg.PluginDir, SocketName) }

// Start loads the checkpoint: every allocation it holds is kept, and every
// resource it names is known, with all its devices unhealthy, until its
// plugin registers again or the grace period (from now) passes. A corrupt
// checkpoint is set aside as kubelet_internal_checkpoint.corrupt (logged as
// an error) and the manager starts with no allocations. activePods lists
// the pods that may hold devices and sourcesReady says when that list is
// complete; when both are set, admission frees the devices of pods no
// longer active. Start returns an error only when the directory cannot be
// read or the state cannot be written.
func (m *Manager) Start(ctx context.Context, activePods func() []*v1.Pod, sourcesReady func() bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.activePods, m.sourcesReady = activePods, sourcesReady
	st, err := m.load()
	switch {
	case err == nil:
		now := m.cfg.Clock.Now()
		for res, ids := range st.Registered {
			r := &resourceState{devices: make(map[string]*pluginapi.Device, len(ids)), stoppedAt: now}
			for _, id := range ids {
				r.devices[id] = &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy}
			}
			m.resources[res] = r
			m.gaugeLocked(res)
		}
		for _, e := range st.Entries {
			m.setAllocLocked(e.PodUID, e.Container, e.Resource, &allocation{ids: e.DeviceIDs, resp: e.resp, restored: true})
		}
		m.cfg.Logger.Info("device manager state restored", zap.Int("resources", len(st.Registered)), zap.Int("allocations", len(st.Entries)))
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, ErrCorruptState) || errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrTooLarge):
		moved, aerr := checkpoint.SetAsideFS(m.fs, m.cfg.StateDir, StateFileName)
		m.cfg.Logger.Error("device manager checkpoint is unusable: set aside, starting with no allocations",
			zap.Error(err), zap.String("setAside", moved), zap.NamedError("setAsideError", aerr))
		if aerr != nil && moved == "" {
			return fmt.Errorf("devicemanager: set aside the corrupt checkpoint: %w", aerr)
		}
		if err := m.persistLocked(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("devicemanager: read checkpoint: %w", err)
	}
	m.started = true
	return nil
}

// Run serves the registration socket (and watches RegistryDir when set)
// until ctx ends, then closes every plugin connection, joins its
// goroutines, removes the socket and returns nil. Start must have been
// called. See package lifecycle for the contract.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	if !started {
		return ErrNotStarted
	}
	if err := os.MkdirAll(m.cfg.PluginDir, 0o750); err != nil {
		return fmt.Errorf("devicemanager: plugin directory: %w", err)
	}
	sock := m.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devicemanager: remove stale socket: %w", err)
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("devicemanager: listen on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registrationServer{m: m})

	var regWatcher *registryWatcher
	if m.cfg.RegistryDir != "" {
		if regWatcher, err = newRegistryWatcher(m); err != nil {
			_ = lis.Close()
			return err
		}
	}

	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	serveErr := make(chan error, 1)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		serveErr <- srv.Serve(lis)
	}()
	if regWatcher != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			regWatcher.run(ctx)
		}()
	}
	close(m.ready)
	m.cfg.Logger.Info("device plugin registration served", zap.String("socket", sock))

	var runErr error
	tick := m.cfg.Clock.NewTicker(m.cfg.ReconcilePeriod)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			if err != nil {
				runErr = fmt.Errorf("devicemanager: registration server: %w", err)
			}
			break loop
		case <-tick.C():
			if err := m.Reconcile(); err != nil {
				m.cfg.Logger.Warn("device manager reconcile", zap.Error(err))
			}
		}
	}
	srv.Stop()
	m.mu.Lock()
	m.runCtx = nil
	for _, r := range m.resources {
		if r.ep != nil {
			r.ep.close()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
	_ = os.Remove(sock)
	return runErr
}

func (e *endpoint) close() {
	e.cancel()
	_ = e.conn.Close()
}

type registrationServer struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register answers a plugin's registration: a bad version or name is
// refused at once; the plugin is then dialled in the background (it may
// start serving only after this call returns).
func (s registrationServer) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := s.m
	if err := checkRegistration(r.GetVersion(), r.GetResourceName(), r.GetEndpoint()); err != nil {
		m.cfg.Logger.Warn("device plugin registration refused", zap.String("resource", r.GetResourceName()), zap.Error(err))
		return nil, err
	}
	m.mu.Lock()
	ctx := m.runCtx
	if ctx != nil {
		m.wg.Add(1)
	}
	m.mu.Unlock()
	if ctx == nil {
		return nil, ErrNotRunning
	}
	go func() {
		defer m.wg.Done()
		if err := m.connect(ctx, r.ResourceName, filepath.Join(m.cfg.PluginDir, r.Endpoint)); err != nil {
			m.cfg.Logger.Warn("device plugin connection failed", zap.String("resource", r.ResourceName), zap.Error(err))
		}
	}()
	return &pluginapi.Empty{}, nil
}

// checkRegistration checks a registration: the version is v1beta1, the
// resource an extended resource name (domain/name, not kubernetes.io),
// the endpoint one file name in the plugin directory.
func checkRegistration(version, res, ep string) error {
	if version != pluginapi.Version {
		return fmt.Errorf("%w: %q (supported: %v)", ErrUnsupportedVersion, version, pluginapi.SupportedVersions)
	}
	if err := CheckResourceName(res); err != nil {
		return err
	}
	if ep == "" || ep == "." || ep == ".." || strings.ContainsRune(ep, '/') || ep == SocketName || len(ep) > 255 {
		return fmt.Errorf("%w: endpoint %q must be one file name in the plugin directory", ErrInvalidRegistration, ep)
	}
	return nil
}

// CheckResourceName checks that name is an extended resource name a
// device plugin may serve: a qualified name with a domain prefix that is
// not kubernetes.io or requests.*.
func CheckResourceName(name string) error {
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return fmt.Errorf("%w: resource name %q: %s", ErrInvalidRegistration, name, strings.Join(errs, "; "))
	}
	domain, _, ok := strings.Cut(name, "/")
	if !ok || domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || strings.HasPrefix(name, "requests.") {
		return fmt.Errorf("%w: resource name %q is not an extended resource (domain/name outside kubernetes.io)", ErrInvalidRegistration, name)
	}
	return nil
}

// RegisterPlugin connects to the plugin serving resource on socket (an
// absolute path) as a registration does, synchronously: it asks the
// plugin's options, makes it the endpoint of resource (a previous one is
// closed) and starts following its device list. Run must be running.
func (m *Manager) RegisterPlugin(ctx context.Context, res, socket string) error {
	if err := CheckResourceName(res); err != nil {
		return err
	}
	if !filepath.IsAbs(socket) || len(socket) > maxSocketPath {
		return fmt.Errorf("%w: endpoint %q must be an absolute path of at most %d bytes", ErrInvalidRegistration, socket, maxSocketPath)
	}
	return m.connect(ctx, res, socket)
}

func (m *Manager) connect(ctx context.Context, res, socket string) error {
	m.mu.Lock()
	runCtx := m.runCtx
	m.mu.Unlock()
	if runCtx == nil {
		return ErrNotRunning
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("devicemanager: dial %s: %w", socket, err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	opts, err := client.GetDevicePluginOptions(cctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	cancel()
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("devicemanager: get device plugin options of %s: %w", res, err)
	}
	epCtx, epCancel := context.WithCancel(runCtx)
	ep := &endpoint{resource: res, socket: socket, conn: conn, client: client, opts: opts, cancel: epCancel}

	m.mu.Lock()
	if m.runCtx == nil {
		m.mu.Unlock()
		ep.close()
		return ErrNotRunning
	}
	r := m.resources[res]
	if r == nil {
		r = &resourceState{devices: map[string]*pluginapi.Device{}}
		m.resources[res] = r
	}
	if r.ep != nil {
		r.ep.close()
	}
	r.ep, r.stoppedAt = ep, time.Time{}
	delete(m.removed, res)
	m.wg.Add(1)
	m.notifyLocked()
	m.mu.Unlock()
	m.cfg.Logger.Info("device plugin registered", zap.String("resource", res), zap.String("endpoint", socket),
		zap.Bool("preStartRequired", opts.GetPreStartRequired()), zap.Bool("preferredAllocation", opts.GetGetPreferredAllocationAvailable()))
	go m.watch(epCtx, ep)
	return nil
}

// watch follows a plugin's ListAndWatch stream until it ends.
func (m *Manager) watch(ctx context.Context, ep *endpoint) {
	defer m.wg.Done()
	stream, err := ep.client.ListAndWatch(ctx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err == nil {
			m.updateDevices(ep, resp.GetDevices())
		}
	}
	m.disconnected(ep, err, ctx.Err() != nil)
}

// updateDevices replaces the device list of ep's resource (ignored when
// ep is no longer its endpoint). A health other than Healthy counts as
// unhealthy; devices without an ID, repeated IDs and devices beyond
// MaxDevicesPerResource are dropped and logged.
func (m *Manager) updateDevices(ep *endpoint, devs []*pluginapi.Device) {
	next := make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		id := d.GetID()
		if id == "" || next[id] != nil || len(next) >= MaxDevicesPerResource || len(id) > 253 {
			m.cfg.Logger.Warn("device plugin sent a bad device; dropped", zap.String("resource", ep.resource), zap.String("device", id))
			continue
		}
		c := &pluginapi.Device{ID: id, Health: d.GetHealth(), Topology: d.GetTopology()}
		if c.Health != pluginapi.Healthy {
			c.Health = pluginapi.Unhealthy
		}
		next[id] = c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep {
		return
	}
	sameIDs := len(next) == len(r.devices)
	if sameIDs {
		for id := range next {
			if r.devices[id] == nil {
				sameIDs = false
				break
			}
		}
	}
	r.devices = next
	m.gaugeLocked(ep.resource)
	m.notifyLocked()
	m.cfg.Logger.Info("devices updated", zap.String("resource", ep.resource), zap.Int("devices", len(next)), zap.Int("healthy", len(r.healthy())))
	if !sameIDs {
		if err := m.persistLocked(); err != nil {
			m.cfg.Logger.Error("device manager checkpoint not written", zap.Error(err))
		}
	}
}

// disconnected marks every device of ep's resource unhealthy and starts
// the grace period, as the kubelet does when a plugin goes away.
// stopping says the manager closed the stream itself (Run ending, or a
// new registration replacing ep).
func (m *Manager) disconnected(ep *endpoint, err error, stopping bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = ep.conn.Close()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep {
		return
	}
	r.ep = nil
	r.stoppedAt = m.cfg.Clock.Now()
	for id, d := range r.devices {
		r.devices[id] = &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy, Topology: d.Topology}
	}
	m.gaugeLocked(ep.resource)
	m.notifyLocked()
	if !stopping {
		m.cfg.Logger.Warn("device plugin disconnected; its devices are unhealthy", zap.String("resource", ep.resource),
			zap.Duration("gracePeriod", m.cfg.GracePeriod), zap.Error(err))
	}
}

// DeviceCapacity returns the extended resources for the node status:
// capacity counts every device of a resource, allocatable its healthy
// ones. A resource whose plugin has been gone longer than the grace period
// is forgotten (the checkpoint is rewritten) and reported as 0 in both
// until it registers again.
func (m *Manager) DeviceCapacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked()
	capacity = make(v1.ResourceList, len(m.resources)+len(m.removed))
	allocatable = make(v1.ResourceList, len(m.resources)+len(m.removed))
	for res, r := range m.resources {
		capacity[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(r.devices)), resource.DecimalSI)
		allocatable[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(r.healthy())), resource.DecimalSI)
	}
	for res := range m.removed {
		capacity[v1.ResourceName(res)] = *resource.NewQuantity(0, resource.DecimalSI)
		allocatable[v1.ResourceName(res)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	return capacity, allocatable
}

// expireLocked forgets the resources whose grace period has passed.
func (m *Manager) expireLocked() {
	now := m.cfg.Clock.Now()
	var gone []string
	for res, r := range m.resources {
		if r.ep == nil && !r.stoppedAt.IsZero() && now.Sub(r.stoppedAt) >= m.cfg.GracePeriod {
			gone = append(gone, res)
		}
	}
	if len(gone) == 0 {
		return
	}
	sort.Strings(gone)
	for _, res := range gone {
		delete(m.resources, res)
		m.removed[res] = true
		m.gaugeLocked(res)
		m.cfg.Logger.Info("device plugin gone past its grace period; resource removed", zap.String("resource", res))
	}
	m.notifyLocked()
	if err := m.persistLocked(); err != nil {
		m.cfg.Logger.Error("device manager checkpoint not written", zap.Error(err))
	}
}

// Devices returns the devices of res (IDs sorted) and whether it is known.
func (m *Manager) Devices(res string) (healthy, unhealthy []string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[res]
	if r == nil {
		return nil, nil, false
	}
	for id, d := range r.devices {
		if d.Health == pluginapi.Healthy {
			healthy = append(healthy, id)
		} else {
			unhealthy = append(unhealthy, id)
		}
	}
	sort.Strings(healthy)
	sort.Strings(unhealthy)
	return healthy, unhealthy, true
}
