package systemd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/godbus/dbus/v5"
)

// fakeLogind is a fake system bus with logind and systemd on it: logind's
// InhibitDelayMaxUSec property, its Inhibit method handing out the read end
// of a pipe as the lock (released when every copy is closed, as logind
// sees it), and systemd's KillUnit, on which logind reads its drop-ins
// again (unless frozen).
type fakeLogind struct {
	t         *testing.T
	dropInDir string

	mu        sync.Mutex
	delay     time.Duration
	frozen    bool // reloads change nothing
	reloads   [][]any
	locks     []*os.File // write ends, one per Inhibit
	inhibits  [][]any
	matches   int
	signals   chan<- *dbus.Signal
	closed    int
	connects  int
	connErr   error
	reads     int
	inhibitEr error
}

func newFakeLogind(t *testing.T, delay time.Duration) *fakeLogind {
	f := &fakeLogind{t: t, delay: delay, dropInDir: filepath.Join(t.TempDir(), "logind.conf.d")}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, w := range f.locks {
			_ = w.Close()
		}
	})
	return f
}

func (f *fakeLogind) connect(context.Context) (Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	if f.connErr != nil {
		return nil, f.connErr
	}
	return &fakeConn{f: f}, nil
}

// held reports whether lock n (0-based) is still held by someone.
func (f *fakeLogind) held(n int) bool {
	f.mu.Lock()
	w := f.locks[n]
	f.mu.Unlock()
	_, err := w.Write([]byte{0})
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		f.t.Fatalf("lock %d: %v", n, err)
	}
	return err == nil
}

func (f *fakeLogind) numLocks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.locks)
}

// emit sends PrepareForShutdown(active) to the subscriber.
func (f *fakeLogind) emit(body ...any) {
	f.mu.Lock()
	ch := f.signals
	f.mu.Unlock()
	if ch == nil {
		f.t.Fatal("nobody subscribed")
	}
	ch <- &dbus.Signal{Path: LogindPath, Name: LogindInterface + ".PrepareForShutdown", Body: body}
}

var dropInLine = regexp.MustCompile(`(?m)^InhibitDelayMaxSec=(\d+)$`)

func (f *fakeLogind) reload() {
	if f.frozen {
		return
	}
	entries, _ := os.ReadDir(f.dropInDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(f.dropInDir, e.Name()))
		if err != nil {
			continue
		}
		if m := dropInLine.FindSubmatch(b); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			f.delay = time.Duration(n) * time.Second
		}
	}
}

type fakeConn struct {
	f *fakeLogind
}

func (c *fakeConn) Object(dest string, path dbus.ObjectPath) dbus.BusObject {
	return &fakeObject{f: c.f, dest: dest, path: path}
}

func (c *fakeConn) AddMatchSignal(options ...dbus.MatchOption) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.matches++
	return nil
}

func (c *fakeConn) Signal(ch chan<- *dbus.Signal) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.signals = ch
}

func (c *fakeConn) RemoveSignal(chan<- *dbus.Signal) {}

func (c *fakeConn) Close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.closed++
	return nil
}

// fakeObject answers the calls the inhibitor makes; the other BusObject
// methods are not used (nil embedded interface).
type fakeObject struct {
	dbus.BusObject
	f    *fakeLogind
	dest string
	path dbus.ObjectPath
}

func (o *fakeObject) GetProperty(p string) (dbus.Variant, error) {
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	if o.dest != LogindService || o.path != LogindPath || p != LogindInterface+".InhibitDelayMaxUSec" {
		return dbus.Variant{}, errors.New("no such property")
	}
	o.f.reads++
	return dbus.MakeVariant(uint64(o.f.delay / time.Microsecond)), nil
}

func (o *fakeObject) Call(method string, _ dbus.Flags, args ...any) *dbus.Call {
	o.f.mu.Lock()
	defer o.f.mu.Unlock()
	switch {
	case o.dest == LogindService && o.path == LogindPath && method == LogindInterface+".Inhibit":
		if o.f.inhibitEr != nil {
			return &dbus.Call{Err: o.f.inhibitEr}
		}
		r, w, err := os.Pipe()
		if err != nil {
			return &dbus.Call{Err: err}
		}
		fd, err := syscall.Dup(int(r.Fd()))
		_ = r.Close()
		if err != nil {
			return &dbus.Call{Err: err}
		}
		o.f.locks = append(o.f.locks, w)
		o.f.inhibits = append(o.f.inhibits, args)
		return &dbus.Call{Body: []any{dbus.UnixFD(fd)}}
	case o.dest == SystemdService && o.path == SystemdPath && method == SystemdInterface+".KillUnit":
		o.f.reloads = append(o.f.reloads, args)
		o.f.reload()
		return &dbus.Call{}
	}
	return &dbus.Call{Err: errors.New("no such method " + method)}
}

// fakeManager records what the inhibitor tells it; Shutdown blocks until
// release is closed.
type fakeManager struct {
	period  time.Duration
	release chan struct{}

	mu        sync.Mutex
	shutdowns int
	cancels   int
}

func (m *fakeManager) PeriodRequested() time.Duration { return m.period }

func (m *fakeManager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.shutdowns++
	m.mu.Unlock()
	select {
	case <-m.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *fakeManager) CancelShutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancels++
}

func (m *fakeManager) counts() (shutdowns, cancels int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shutdowns, m.cancels
}

func newInhibitor(t *testing.T, f *fakeLogind, m Shutdowner) *Inhibitor {
	t.Helper()
	i, err := New(Config{Manager: m, Connect: f.connect, DropInDir: f.dropInDir})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// InhibitDelayMaxSec below the period: the drop-in is written, logind
// reloaded through systemd's KillUnit(SIGHUP), the new value read back;
// then the delay lock is taken and PrepareForShutdown subscribed.
func TestSetupRaisesInhibitDelayAndTakesLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLogind(t, 5*time.Second)
		i := newInhibitor(t, f, &fakeManager{period: 30 * time.Second})
		if err := i.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(f.dropInDir, "99-nodekit.conf"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "# Written by nodekit: time for the node's graceful shutdown\n[Login]\nInhibitDelayMaxSec=30\n"; string(b) != want {
			t.Errorf("drop-in %q, want %q", b, want)
		}
		if len(f.reloads) != 1 || f.reloads[0][0] != "systemd-logind.service" || f.reloads[0][1] != "all" || f.reloads[0][2] != int32(1) {
			t.Errorf("reloads %v, want KillUnit(systemd-logind.service, all, SIGHUP)", f.reloads)
		}
		if f.delay != 30*time.Second {
			t.Errorf("logind's delay %v, want 30s", f.delay)
		}
		if f.numLocks() != 1 || !f.held(0) || !i.Locked() {
			t.Fatal("no lock held")
		}
		if in := f.inhibits[0]; in[0] != "shutdown" || in[1] != "nodekit" || in[2] != DefaultWhy || in[3] != "delay" {
			t.Errorf("Inhibit%v, want (shutdown, nodekit, ..., delay)", in)
		}
		if f.matches != 1 || f.signals == nil {
			t.Errorf("%d match rules, subscribed %v", f.matches, f.signals != nil)
		}
		i.Release()
		if f.held(0) || i.Locked() {
			t.Error("the lock is still held after Release")
		}
	})
}

// A delay already long enough is left alone.
func TestSetupDelayLongEnough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLogind(t, 60*time.Second)
		i := newInhibitor(t, f, &fakeManager{period: 30 * time.Second})
		if err := i.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(f.dropInDir); !os.IsNotExist(err) {
			t.Errorf("drop-in dir made: %v", err)
		}
		if len(f.reloads) != 0 || !f.held(0) {
			t.Errorf("reloads %v, lock held %v", f.reloads, f.held(0))
		}
	})
}

// logind that does not take the new value: five reads 100-800 ms apart,
// then ErrInhibitDelay, no lock, connection closed.
func TestSetupDelayNotRaised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLogind(t, 5*time.Second)
		f.frozen = true
		i := newInhibitor(t, f, &fakeManager{period: 30 * time.Second})
		start := time.Now() //nodekit:allow clock virtual time of the synctest bubble
		err := i.Setup(t.Context())
		if !errors.Is(err, ErrInhibitDelay) {
			t.Fatalf("Setup: %v, want ErrInhibitDelay", err)
		}
		if took := time.Since(start); took != 1500*time.Millisecond { //nodekit:allow clock virtual time
			t.Errorf("gave up after %v, want 1.5s (100+200+400+800 ms)", took)
		}
		if f.reads != 6 { // the first read, then five after the reload
			t.Errorf("%d reads, want 6", f.reads)
		}
		if f.numLocks() != 0 || i.Locked() || f.closed != 1 {
			t.Errorf("%d locks taken, locked %v, %d closes; want none, false, 1", f.numLocks(), i.Locked(), f.closed)
		}
	})
}

// PrepareForShutdown(true) runs the shutdown with the lock held, and the
// lock is released once it is done; PrepareForShutdown(false) cancels and
// takes a new lock. When Run ends, the lock is released and the bus closed.
func TestRunPrepareForShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLogind(t, 30*time.Second)
		m := &fakeManager{period: 30 * time.Second, release: make(chan struct{})}
		i := newInhibitor(t, f, m)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- i.Run(ctx) }()
		synctest.Wait()
		if f.numLocks() != 1 || !f.held(0) {
			t.Fatal("no lock after start")
		}
		f.emit("not a bool") // ignored
		f.emit(true)
		synctest.Wait()
		if s, _ := m.counts(); s != 1 {
			t.Fatalf("%d shutdowns, want 1", s)
		}
		if !f.held(0) {
			t.Fatal("the lock was released while the pods shut down")
		}
		close(m.release)
		synctest.Wait()
		if f.held(0) || i.Locked() {
			t.Fatal("the lock is still held after the pods are done")
		}
		f.emit(false)
		synctest.Wait()
		if _, c := m.counts(); c != 1 {
			t.Errorf("%d cancellations, want 1", c)
		}
		if f.numLocks() != 2 || !f.held(1) {
			t.Fatal("no new lock after the cancellation")
		}
		if err := i.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v, want ErrAlreadyRan", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if f.held(1) || f.closed != 1 {
			t.Errorf("after Run: lock held %v, %d closes", f.held(1), f.closed)
		}
	})
}

// The bus going away (the signal channel closed) makes Run connect again
// after ReconnectPeriod, with a new lock; no bus at all leaves Run waiting
// and trying.
func TestRunReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLogind(t, 30*time.Second)
		f.connErr = errors.New("no system bus")
		i := newInhibitor(t, f, &fakeManager{period: 10 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- i.Run(ctx) }()
		<-time.After(2500 * time.Millisecond)
		synctest.Wait()
		f.mu.Lock()
		if f.connects != 3 { // at 0, 1s, 2s
			t.Errorf("%d connection tries in 2.5s, want 3", f.connects)
		}
		f.connErr = nil
		f.mu.Unlock()
		<-time.After(time.Second)
		synctest.Wait()
		if f.numLocks() != 1 || !f.held(0) {
			t.Fatal("no lock once the bus is there")
		}
		f.mu.Lock()
		ch := f.signals
		f.signals = nil
		f.mu.Unlock()
		close(ch) // the bus went away
		synctest.Wait()
		if f.held(0) {
			t.Error("the old lock is kept after the bus went away")
		}
		<-time.After(time.Second)
		synctest.Wait()
		if f.numLocks() != 2 || !f.held(1) {
			t.Fatal("no new lock after reconnecting")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{ReconnectPeriod: -1, DropInName: "../x.conf", DropInDir: "rel"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New: %v, want ErrInvalidConfig", err)
	}
	for _, w := range []string{"Manager is required", "ReconnectPeriod", "DropInName", "DropInDir"} {
		if !regexp.MustCompile(regexp.QuoteMeta(w)).MatchString(err.Error()) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}
