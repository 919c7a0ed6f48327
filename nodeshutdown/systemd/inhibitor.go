package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/nodeshutdown"
)

// The D-Bus names of logind and systemd.
const (
	LogindService    = "org.freedesktop.login1"
	LogindPath       = dbus.ObjectPath("/org/freedesktop/login1")
	LogindInterface  = "org.freedesktop.login1.Manager"
	SystemdService   = "org.freedesktop.systemd1"
	SystemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	SystemdInterface = "org.freedesktop.systemd1.Manager"
)

// Defaults of Config.
const (
	DefaultDropInDir       = "/etc/systemd/logind.conf.d"
	DefaultDropInName      = "99-nodekit.conf"
	DefaultWho             = "nodekit"
	DefaultWhy             = "nodekit needs time to handle node shutdown"
	DefaultReconnectPeriod = time.Second
)

// Conn is what the inhibitor uses of a D-Bus connection to the system bus;
// *dbus.Conn has it.
type Conn interface {
	Object(dest string, path dbus.ObjectPath) dbus.BusObject
	AddMatchSignal(options ...dbus.MatchOption) error
	Signal(ch chan<- *dbus.Signal)
	RemoveSignal(ch chan<- *dbus.Signal)
	Close() error
}

// Shutdowner is what the inhibitor drives; *nodeshutdown.Manager is one.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
	CancelShutdown()
	PeriodRequested() time.Duration
}

// Config configures an Inhibitor.
type Config struct {
	// Manager is told when the node shuts down (required; Watcher sets
	// it).
	Manager Shutdowner
	// Connect opens a connection to the system bus, closed by the
	// inhibitor when it is done with it; nil is dbus.ConnectSystemBus
	// (DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket).
	Connect func(ctx context.Context) (Conn, error)
	// DropInDir and DropInName: where logind's InhibitDelayMaxSec is
	// raised when it is below the shutdown's period (DefaultDropInDir,
	// DefaultDropInName; the kubelet's is 99-kubelet.conf).
	DropInDir  string
	DropInName string
	// Who and Why describe the inhibitor lock to logind
	// (systemd-inhibit --list); DefaultWho, DefaultWhy.
	Who, Why string
	// ReconnectPeriod is the wait before a new connection after the bus
	// went away or a setup failed (DefaultReconnectPeriod, the kubelet's).
	ReconnectPeriod time.Duration
	Clock           clock.WithTicker
	Logger          *zap.Logger
}

// Watcher returns an agentshutdown.Watcher: logind's inhibitor made with
// cfg for the built Manager.
func Watcher(cfg Config) func(m *nodeshutdown.Manager) (func(ctx context.Context) error, error) {
	return func(m *nodeshutdown.Manager) (func(ctx context.Context) error, error) {
		cfg.Manager = m
		i, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return i.Run, nil
	}
}

// Inhibitor holds a logind delay inhibitor lock for shutdowns and runs the
// node's graceful shutdown when logind announces one, releasing the lock
// once the pods are done. See the package documentation.
type Inhibitor struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	conn   Conn
	lock   *os.File // the inhibitor lock's file descriptor; nil: none held
	events chan *dbus.Signal

	once lifecycle.Once
}

// New validates cfg and fills defaults. It does no I/O.
func New(cfg Config) (*Inhibitor, error) {
	var errs []error
	if cfg.Manager == nil {
		errs = append(errs, fmt.Errorf("%w: Manager is required", ErrInvalidConfig))
	}
	if cfg.ReconnectPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: ReconnectPeriod must not be negative, got %v", ErrInvalidConfig, cfg.ReconnectPeriod))
	}
	if cfg.DropInName != "" && (filepath.Base(cfg.DropInName) != cfg.DropInName || filepath.Ext(cfg.DropInName) != ".conf") {
		errs = append(errs, fmt.Errorf("%w: DropInName %q must be a file name ending in .conf", ErrInvalidConfig, cfg.DropInName))
	}
	if cfg.DropInDir != "" && !filepath.IsAbs(cfg.DropInDir) {
		errs = append(errs, fmt.Errorf("%w: DropInDir %q must be an absolute path", ErrInvalidConfig, cfg.DropInDir))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Connect == nil {
		cfg.Connect = func(context.Context) (Conn, error) { return dbus.ConnectSystemBus() }
	}
	if cfg.DropInDir == "" {
		cfg.DropInDir = DefaultDropInDir
	}
	if cfg.DropInName == "" {
		cfg.DropInName = DefaultDropInName
	}
	if cfg.Who == "" {
		cfg.Who = DefaultWho
	}
	if cfg.Why == "" {
		cfg.Why = DefaultWhy
	}
	if cfg.ReconnectPeriod == 0 {
		cfg.ReconnectPeriod = DefaultReconnectPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Inhibitor{cfg: cfg, log: cfg.Logger.Named("nodeshutdown.systemd")}, nil
}

// Locked reports whether the inhibitor holds its lock.
func (i *Inhibitor) Locked() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.lock != nil
}

// Setup connects to the system bus, raises logind's InhibitDelayMaxSec
// when it is below the shutdown's period (a drop-in file, then logind
// reloads its configuration; it must show the new value within about 1.5
// s), takes the delay inhibitor lock for shutdowns and subscribes to
// logind's PrepareForShutdown. On failure nothing is left open.
func (i *Inhibitor) Setup(ctx context.Context) error {
	conn, err := i.cfg.Connect(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBus, err)
	}
	if err := i.setup(ctx, conn); err != nil {
		i.mu.Lock()
		i.releaseLocked()
		i.mu.Unlock()
		_ = conn.Close()
		return err
	}
	return nil
}

func (i *Inhibitor) setup(ctx context.Context, conn Conn) error {
	requested := i.cfg.Manager.PeriodRequested()
	current, err := InhibitDelayMax(conn)
	if err != nil {
		return err
	}
	if requested > current {
		i.log.Info("raising logind's InhibitDelayMaxSec", zap.Duration("current", current), zap.Duration("requested", requested))
		if err := i.raise(ctx, conn, requested); err != nil {
			return err
		}
	}
	i.mu.Lock()
	i.conn = conn
	i.mu.Unlock()
	if err := i.acquire(); err != nil {
		return err
	}
	if err := conn.AddMatchSignal(dbus.WithMatchObjectPath(LogindPath), dbus.WithMatchInterface(LogindInterface),
		dbus.WithMatchMember("PrepareForShutdown")); err != nil {
		return fmt.Errorf("%w: subscribing to PrepareForShutdown: %w", ErrBus, err)
	}
	events := make(chan *dbus.Signal, 16)
	conn.Signal(events)
	i.mu.Lock()
	i.events = events
	i.mu.Unlock()
	i.log.Info("holding logind's delay inhibitor lock for shutdowns", zap.Duration("period", requested))
	return nil
}

// raise writes the drop-in, has logind reload its configuration and waits
// until InhibitDelayMaxUSec shows at least want, as the kubelet does: five
// reads 100 ms, 200 ms, 400 ms and 800 ms apart.
func (i *Inhibitor) raise(ctx context.Context, conn Conn, want time.Duration) error {
	if err := i.writeDropIn(want); err != nil {
		return err
	}
	if err := ReloadLogind(conn); err != nil {
		return err
	}
	wait := 100 * time.Millisecond
	var current time.Duration
	const attempts = 5
	for n := 1; ; n++ {
		var err error
		current, err = InhibitDelayMax(conn)
		if err != nil {
			return err
		}
		if current >= want {
			return nil
		}
		if n == attempts {
			break
		}
		t := i.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		wait *= 2
	}
	return fmt.Errorf("%w: logind's InhibitDelayMaxSec is still %v after %d reads, want %v (the shutdown's period)", ErrInhibitDelay, current, attempts, want)
}

// writeDropIn writes logind's drop-in with InhibitDelayMaxSec (whole
// seconds) atomically.
func (i *Inhibitor) writeDropIn(d time.Duration) error {
	if err := os.MkdirAll(i.cfg.DropInDir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrInhibitDelay, err)
	}
	body := fmt.Sprintf("# Written by nodekit: time for the node's graceful shutdown\n[Login]\nInhibitDelayMaxSec=%.0f\n", d.Seconds())
	path := filepath.Join(i.cfg.DropInDir, i.cfg.DropInName)
	tmp, err := os.CreateTemp(i.cfg.DropInDir, "."+i.cfg.DropInName+".tmp-")
	if err == nil {
		_, err = tmp.WriteString(body)
		if err == nil {
			err = tmp.Chmod(0o644)
		}
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return fmt.Errorf("%w: writing %s: %w", ErrInhibitDelay, path, err)
	}
	return nil
}

// acquire takes a new lock, then lets go of the old one, if any.
func (i *Inhibitor) acquire() error {
	i.mu.Lock()
	conn := i.conn
	i.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("%w: not connected", ErrBus)
	}
	f, err := Inhibit(conn, i.cfg.Who, i.cfg.Why)
	if err != nil {
		return err
	}
	i.mu.Lock()
	old := i.lock
	i.lock = f
	i.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// Release lets go of the lock: logind goes on with the shutdown.
func (i *Inhibitor) Release() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.releaseLocked()
}

func (i *Inhibitor) releaseLocked() {
	if i.lock != nil {
		if err := i.lock.Close(); err != nil {
			i.log.Warn("releasing the inhibitor lock", zap.Error(err))
		}
		i.lock = nil
	}
}

// Handle acts on one PrepareForShutdown: true runs the node's shutdown and
// then releases the lock; false (the shutdown was cancelled) makes the
// node ready again and takes a new lock.
func (i *Inhibitor) Handle(ctx context.Context, shuttingDown bool) error {
	if !shuttingDown {
		i.log.Info("logind cancelled the shutdown")
		i.cfg.Manager.CancelShutdown()
		return i.acquire()
	}
	i.log.Info("logind announced a shutdown: shutting the pods down")
	err := i.cfg.Manager.Shutdown(ctx)
	if ctx.Err() != nil {
		return err
	}
	i.Release()
	i.log.Info("pods done: inhibitor lock released, the node shuts down")
	return err
}

// Run sets up (Setup) and handles logind's PrepareForShutdown signals
// until ctx ends; it connects again after ReconnectPeriod when the bus goes
// away or a setup fails (a machine without logind is logged once, then
// tried again quietly). It releases the lock and closes the connection
// when it returns: nil once ctx ended. It follows the lifecycle contract.
func (i *Inhibitor) Run(ctx context.Context) error {
	if err := i.once.Start(); err != nil {
		return err
	}
	defer i.close()
	failures := 0
	for {
		if err := i.Setup(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if failures == 0 {
				i.log.Error("no logind inhibitor: the node will not shut down gracefully on its own until it can be taken", zap.Error(err))
			} else {
				i.log.Debug("logind inhibitor setup failed", zap.Error(err))
			}
			failures++
		} else {
			failures = 0
			i.serve(ctx)
			i.close()
			if ctx.Err() != nil {
				return nil
			}
			i.log.Info("the system bus went away: connecting again")
		}
		t := i.cfg.Clock.NewTimer(i.cfg.ReconnectPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// serve handles the signals until ctx ends or the connection's signal
// channel closes.
func (i *Inhibitor) serve(ctx context.Context) {
	i.mu.Lock()
	events := i.events
	i.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-events:
			if !ok {
				return
			}
			active, ok := prepareForShutdown(sig)
			if !ok {
				i.log.Warn("ignoring a malformed PrepareForShutdown signal")
				continue
			}
			if err := i.Handle(ctx, active); err != nil && ctx.Err() == nil {
				i.log.Error("handling PrepareForShutdown", zap.Bool("active", active), zap.Error(err))
			}
		}
	}
}

// prepareForShutdown reads logind's PrepareForShutdown(b) signal.
func prepareForShutdown(sig *dbus.Signal) (active, ok bool) {
	if sig == nil || sig.Name != LogindInterface+".PrepareForShutdown" || len(sig.Body) == 0 {
		return false, false
	}
	active, ok = sig.Body[0].(bool)
	return active, ok
}

// close releases the lock and closes the connection.
func (i *Inhibitor) close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.releaseLocked()
	if i.conn != nil {
		if i.events != nil {
			i.conn.RemoveSignal(i.events)
		}
		_ = i.conn.Close()
		i.conn, i.events = nil, nil
	}
}

// InhibitDelayMax reads logind's InhibitDelayMaxUSec: how long a delay
// inhibitor may hold a shutdown back.
func InhibitDelayMax(conn Conn) (time.Duration, error) {
	v, err := conn.Object(LogindService, LogindPath).GetProperty(LogindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("%w: reading logind's InhibitDelayMaxUSec: %w", ErrBus, err)
	}
	us, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("%w: logind's InhibitDelayMaxUSec is a %T, not a uint64", ErrBus, v.Value())
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Inhibit takes a logind delay inhibitor lock for shutdowns; closing the
// returned file releases it.
func Inhibit(conn Conn, who, why string) (*os.File, error) {
	call := conn.Object(LogindService, LogindPath).Call(LogindInterface+".Inhibit", 0, "shutdown", who, why, "delay")
	if call.Err != nil {
		return nil, fmt.Errorf("%w: taking logind's inhibitor lock: %w", ErrBus, call.Err)
	}
	var fd dbus.UnixFD
	if err := call.Store(&fd); err != nil {
		return nil, fmt.Errorf("%w: logind's inhibitor lock: %w", ErrBus, err)
	}
	if fd < 0 {
		return nil, fmt.Errorf("%w: logind's inhibitor lock: bad file descriptor %d", ErrBus, fd)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// ReloadLogind makes logind read its configuration again: systemd sends
// systemd-logind.service SIGHUP (KillUnit), as the kubelet does.
func ReloadLogind(conn Conn) error {
	call := conn.Object(SystemdService, SystemdPath).Call(SystemdInterface+".KillUnit", 0, "systemd-logind.service", "all", int32(1))
	if call.Err != nil {
		return fmt.Errorf("%w: reloading logind's configuration: %w", ErrBus, call.Err)
	}
	return nil
}
