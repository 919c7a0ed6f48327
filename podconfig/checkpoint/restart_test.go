package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// runOn starts Run on a harness whose fake clock reads start.
func runOn(t *testing.T, dir string, start time.Time, replayAfter time.Duration) *harness {
	t.Helper()
	h := newHarness(t, dir, replayAfter, nil)
	h.clock.SetTime(start)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.src.Run(ctx) }()
	stopped := false
	h.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}
	t.Cleanup(h.stop)
	return h
}

func stamped(name string, at time.Time) *v1.Pod {
	p := pod(name)
	p.CreationTimestamp = metav1.NewTime(at)
	return p
}

// TestClockJumpsNeverStallReplay: an appliance boots with its clock in
// 1970 and NTP moves it to now (and later a year on, and back again); the
// persisted set is replayed ReplayAfter after start whatever the clock
// says, no pod is dropped for looking too old or too new, and the source
// keeps persisting after every jump.
func TestClockJumpsNeverStallReplay(t *testing.T) {
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	epoch := time.Unix(0, 0).UTC()
	dir := t.TempDir()

	// Written "now", with pods created now and in 2020.
	h := runOn(t, dir, now, -1)
	h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{stamped("a", now), stamped("b", now.AddDate(-6, 0, 0))}})
	h.stop()

	// Boot in 1970: the replay timer runs on the 1970 clock.
	h2 := runOn(t, dir, epoch, 0)
	h2.waitTimer()
	h2.expectNone(t)
	// NTP: forward 56 years before ReplayAfter has passed. The replay
	// happens (at the latest after ReplayAfter; a fake clock fires at the
	// jump) with every pod, none dropped for a timestamp "in the future".
	h2.clock.SetTime(now)
	u := h2.recv(t)
	if u.Op != kubetypes.SET || names(u.Pods) != "a/uid-a,b/uid-b" {
		t.Fatalf("replay after the jump: %v %s", u.Op, names(u.Pods))
	}
	if !u.Pods[0].CreationTimestamp.Time.Equal(now) {
		t.Errorf("creation timestamp changed: %v", u.Pods[0].CreationTimestamp)
	}
	// Forward a year, then back to 1970: live updates are persisted
	// through both jumps.
	h2.clock.SetTime(now.AddDate(1, 0, 0))
	h2.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{stamped("c", now.AddDate(1, 0, 0))}})
	h2.clock.SetTime(epoch)
	h2.send(t, kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{stamped("d", epoch)}})
	h2.stop()
	if h2.logs.FilterMessage("replayed persisted pods").Len() != 1 { // logged after the send: checked once Run is done
		t.Errorf("replay not logged: %v", h2.logs.All())
	}

	// A reboot a year on replays the set written "in 1970".
	h3 := runOn(t, dir, now.AddDate(1, 0, 0), 0)
	h3.waitTimer()
	h3.clock.Step(DefaultReplayAfter)
	if u := h3.recv(t); names(u.Pods) != "c/uid-c,d/uid-d" {
		t.Fatalf("replay after jumps = %s", names(u.Pods))
	}
}

// TestClockBackBeforeReplay: the clock is set back between start and the
// replay. The replay waits for elapsed time (Go timers are monotonic), so
// with the real clock it fires after ReplayAfter; with the fake clock it
// fires once the clock passes the deadline again, and a live update in
// the meantime still wins.
func TestClockBackBeforeReplay(t *testing.T) {
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("a")); err != nil {
		t.Fatal(err)
	}
	h := runOn(t, dir, now, 0)
	h.waitTimer()
	h.clock.SetTime(time.Unix(0, 0))
	h.expectNone(t)
	if got := h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("live")}}); names(got.Pods) != "live/uid-live" {
		t.Fatalf("live = %s", names(got.Pods))
	}
	h.clock.SetTime(now.Add(time.Hour))
	h.stop()
	h.expectNone(t)
}

// TestRestartAfterCrashDuringWrite: a crash between creating the temporary
// file and the rename leaves a partial ".podconfig-<source>.json.tmp-*"
// next to the last complete file. The restart replays the complete file
// and removes the leftover.
func TestRestartAfterCrashDuringWrite(t *testing.T) {
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("a"), pod("b")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, -1, nil)
	leftover := filepath.Join(dir, "."+h.src.FileName()+".tmp-12345")
	if err := os.WriteFile(leftover, []byte("NKC\x01partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".podconfig-other.json.tmp-1") // another source's: not ours to remove
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if sent, err := h.src.Replay(t.Context()); !sent || err != nil {
		t.Fatalf("Replay = %v, %v", sent, err)
	}
	if u := h.recv(t); names(u.Pods) != "a/uid-a,b/uid-b" {
		t.Fatalf("replayed %s", names(u.Pods))
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary file: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another source's temporary file removed: %v", err)
	}
}

// TestCorruptAtRestartStartsAndSaysSo: Run on a corrupt file starts empty,
// warns where the file went, keeps an earlier set-aside copy, and the next
// live set is persisted and replayed by the next start.
func TestCorruptAtRestartStartsAndSaysSo(t *testing.T) {
	dir := t.TempDir()
	h0 := newHarness(t, dir, -1, nil)
	path := filepath.Join(dir, h0.src.FileName())
	if err := os.WriteFile(path+".corrupt", []byte("from an earlier boot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ckptWrite(dir, pod("a")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[len(b)-2] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	h := runOn(t, dir, time.Unix(0, 0), -1)
	h.expectNone(t)
	h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("fresh")}})
	warn := h.logs.FilterMessageSnippet("set aside").FilterLevelExact(zapcore.WarnLevel)
	if warn.Len() != 1 || warn.All()[0].ContextMap()["moved_to"] != path+".corrupt.1" {
		t.Fatalf("warning: %v", h.logs.All())
	}
	if old, _ := os.ReadFile(path + ".corrupt"); string(old) != "from an earlier boot" {
		t.Errorf("earlier set-aside copy overwritten: %q", old)
	}
	h.stop()

	h2 := runOn(t, dir, time.Unix(0, 0), -1)
	if u := h2.recv(t); names(u.Pods) != "fresh/uid-fresh" {
		t.Fatalf("replayed %s", names(u.Pods))
	}
}

// TestCorruptLatestFallsBackToPrevious: each write keeps the set it
// replaces as "<file>.prev". A corrupt latest set is set aside and the
// previous one (one update older) is replayed, with a warning; a crash
// between keeping the previous set and writing the new one leaves only the
// previous set, which is replayed too.
func TestCorruptLatestFallsBackToPrevious(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, -1, nil)
	for _, set := range [][]*v1.Pod{{pod("a")}, {pod("a"), pod("b")}} {
		if err := h.src.Handle(t.Context(), kubetypes.PodUpdate{Op: kubetypes.SET, Pods: set}); err != nil {
			t.Fatal(err)
		}
		h.recv(t)
	}
	path := filepath.Join(dir, h.src.FileName())
	b, _ := os.ReadFile(path)
	b[len(b)-4] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, dir, -1, nil)
	if sent, err := h2.src.Replay(t.Context()); !sent || err != nil {
		t.Fatalf("Replay = %v, %v", sent, err)
	}
	if u := h2.recv(t); names(u.Pods) != "a/uid-a" {
		t.Fatalf("replayed %s, want the previous set", names(u.Pods))
	}
	if h2.logs.FilterMessageSnippet("replaying the previous set").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
		t.Errorf("fallback not logged: %v", h2.logs.All())
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Errorf("corrupt latest not set aside: %v", err)
	}

	// Crash after the rotation: only the previous generation is there.
	if err := os.Rename(path+".corrupt", path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".prev"); err != nil { // the corrupt one becomes "previous"
		t.Fatal(err)
	}
	h3 := newHarness(t, dir, -1, nil)
	if sent, err := h3.src.Replay(t.Context()); sent || err != nil {
		t.Fatalf("Replay with a corrupt previous set only = %v, %v", sent, err)
	}
	if h3.logs.FilterMessage("no usable persisted pods: starting empty").Len() != 1 {
		t.Errorf("start empty not logged: %v", h3.logs.All())
	}
	if err := ckptWrite(dir, pod("c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".prev"); err != nil {
		t.Fatal(err)
	}
	h4 := newHarness(t, dir, -1, nil)
	if sent, err := h4.src.Replay(t.Context()); !sent || err != nil {
		t.Fatalf("Replay with the previous set only = %v, %v", sent, err)
	}
	if u := h4.recv(t); names(u.Pods) != "c/uid-c" {
		t.Fatalf("replayed %s", names(u.Pods))
	}
}
