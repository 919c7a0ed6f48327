//go:build e2e

package systemd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// A real dbus-daemon on a private socket, with a fake logind and systemd
// exported on it by godbus: the inhibitor's calls, the lock's file
// descriptor passed over the socket, the property and the signal go
// through real D-Bus. (The machine has no system bus and no logind: no
// systemd runs as PID 1 here.)
func TestInhibitorOverRealDBus(t *testing.T) {
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("no dbus-daemon")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(cfg, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+filepath.Join(dir, "bus")+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+cfg, "--nofork", "--print-address")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon address: %v", err)
	}
	addr = strings.TrimSpace(addr)

	logind := &busLogind{dropIn: filepath.Join(dir, "logind.conf.d"), delay: 5 * time.Second}
	srv, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for _, name := range []string{LogindService, SystemdService} {
		if r, err := srv.RequestName(name, dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("RequestName %s: %v %v", name, r, err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.Export(logind, LogindPath, LogindInterface))
	must(srv.Export(busProperties{logind}, LogindPath, "org.freedesktop.DBus.Properties"))
	must(srv.Export(busSystemd{logind}, SystemdPath, SystemdInterface))

	m := &fakeManager{period: 20 * time.Second, release: make(chan struct{})}
	i, err := New(Config{Manager: m, DropInDir: logind.dropIn,
		Connect: func(context.Context) (Conn, error) { return dbus.Connect(addr) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- i.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	poll(t, "the lock taken", i.Locked)
	logind.dropOwnCopy() // from now on only the inhibitor holds the lock
	if d := logind.get(); d != 20*time.Second {
		t.Errorf("logind's delay %v after setup, want 20s (raised through the drop-in)", d)
	}
	if !logind.held() {
		t.Fatal("logind sees no lock")
	}
	if w := logind.who(); w != "shutdown nodekit delay" {
		t.Errorf("Inhibit(%s), want shutdown nodekit ... delay", w)
	}
	// Subscribing is asynchronous on the bus: emit until the shutdown
	// begins.
	poll(t, "the shutdown started by PrepareForShutdown(true)", func() bool {
		if s, _ := m.counts(); s > 0 {
			return true
		}
		must(srv.Emit(LogindPath, LogindInterface+".PrepareForShutdown", true))
		return false
	})
	if !logind.held() {
		t.Fatal("the lock was released before the pods were done")
	}
	close(m.release)
	poll(t, "the lock released", func() bool { return !logind.held() })
}

// poll checks cond every 50ms until it holds, or fails the test after one
// last check once 20s have passed.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	expired := false
	for !cond() {
		if expired {
			t.Fatalf("%s: not within 20s", what)
		}
		select {
		case <-deadline.C:
			expired = true
		case <-tick.C:
		}
	}
}

// busLogind is logind's Manager interface on the bus.
type busLogind struct {
	dropIn string

	mu    sync.Mutex
	delay time.Duration
	r, w  *os.File
	args  string
}

func (l *busLogind) get() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delay
}

func (l *busLogind) who() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.args
}

func (l *busLogind) dropOwnCopy() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.r.Close()
}

// held: someone still has the read end of the lock's pipe.
func (l *busLogind) held() bool {
	l.mu.Lock()
	w := l.w
	l.mu.Unlock()
	_, err := w.Write([]byte{0})
	return !errors.Is(err, syscall.EPIPE)
}

// Inhibit is logind's method: the read end of a pipe is the lock.
func (l *busLogind) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r, l.w, l.args = r, w, what+" "+who+" "+mode
	return dbus.UnixFD(r.Fd()), nil
}

type busProperties struct{ l *busLogind }

// Get is org.freedesktop.DBus.Properties.Get.
func (p busProperties) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	if iface != LogindInterface || name != "InhibitDelayMaxUSec" {
		return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, name))
	}
	return dbus.MakeVariant(uint64(p.l.get() / time.Microsecond)), nil
}

type busSystemd struct{ l *busLogind }

// KillUnit is systemd's: SIGHUP to systemd-logind makes it read its
// drop-ins again.
func (s busSystemd) KillUnit(unit, who string, signal int32) *dbus.Error {
	if unit != "systemd-logind.service" || who != "all" || signal != int32(syscall.SIGHUP) {
		return dbus.MakeFailedError(fmt.Errorf("unexpected KillUnit(%s, %s, %d)", unit, who, signal))
	}
	b, err := os.ReadFile(filepath.Join(s.l.dropIn, DefaultDropInName))
	if err != nil {
		return dbus.MakeFailedError(err)
	}
	var sec int
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "InhibitDelayMaxSec="); ok {
			_, _ = fmt.Sscan(v, &sec)
		}
	}
	s.l.mu.Lock()
	s.l.delay = time.Duration(sec) * time.Second
	s.l.mu.Unlock()
	return nil
}
