package podconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/fsutil"
	"github.com/nodekit/nodekit/kubetypes"
)

func manifest(name string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: c\n    image: img:1\n"
}

type fileHarness struct {
	out    chan kubetypes.PodUpdate
	src    *FileSource
	errs   []string
	clk    *clocktesting.FakeClock
	ctx    context.Context
	cancel context.CancelFunc
}

func newFileHarness(t *testing.T, path string) *fileHarness {
	t.Helper()
	h := &fileHarness{out: make(chan kubetypes.PodUpdate, 10), clk: clocktesting.NewFakeClock(t0)}
	src, err := NewFileSource(FileSourceConfig{Path: path, NodeName: "node", Clock: h.clk, Out: h.out,
		OnError: func(p string, err error) { h.errs = append(h.errs, err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	h.src = src
	h.ctx, h.cancel = context.WithCancel(t.Context())
	t.Cleanup(h.cancel)
	return h
}

// next returns the pending update, or fails; none returns true if nothing is pending.
func (h *fileHarness) sync(t *testing.T) {
	t.Helper()
	if err := h.src.Sync(h.ctx); err != nil {
		t.Fatal(err)
	}
}

func (h *fileHarness) pending() []kubetypes.PodUpdate {
	var us []kubetypes.PodUpdate
	for {
		select {
		case u := <-h.out:
			us = append(us, u)
		default:
			return us
		}
	}
}

func names(u kubetypes.PodUpdate) string {
	var n []string
	for _, p := range u.Pods {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExtractFromEmptyDir(t *testing.T) {
	h := newFileHarness(t, t.TempDir())
	h.sync(t)
	us := h.pending()
	if len(us) != 1 || us[0].Op != kubetypes.SET || us[0].Source != kubetypes.SourceFile || len(us[0].Pods) != 0 {
		t.Fatalf("got %+v", us)
	}
	h.sync(t)
	if us := h.pending(); len(us) != 0 {
		t.Errorf("unchanged dir sent again: %+v", us)
	}
}

func TestMissingPathSendsEmptySet(t *testing.T) {
	h := newFileHarness(t, filepath.Join(t.TempDir(), "nope"))
	h.sync(t)
	if us := h.pending(); len(us) != 1 || len(us[0].Pods) != 0 {
		t.Fatalf("got %+v", us)
	}
}

func TestExtractFromBadDataFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	write(t, path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n")
	h := newFileHarness(t, path)
	h.sync(t)
	if us := h.pending(); len(us) != 0 {
		t.Fatalf("a single unparsable file sent %+v", us)
	}
	if len(h.errs) != 1 || !strings.Contains(h.errs[0], path) || !strings.Contains(h.errs[0], "line") {
		t.Errorf("errors reported: %q", h.errs)
	}
	h.sync(t)
	if len(h.errs) != 1 {
		t.Errorf("the same broken content was reported again: %q", h.errs)
	}
	write(t, path, manifest("good"))
	h.sync(t)
	if us := h.pending(); len(us) != 1 || names(us[0]) != "good-node" {
		t.Fatalf("after fixing: %+v", us)
	}
}

func TestDirectoryRulesAndLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "b.yaml"), manifest("b"))
	write(t, filepath.Join(dir, "a.yaml"), manifest("a"))
	write(t, filepath.Join(dir, ".hidden.yaml"), manifest("hidden"))
	write(t, filepath.Join(dir, "broken.yaml"), "kind: Pod\napiVersion: v1\nmetadata: {name: broken}\nspec:\n  containers: [{name: Bad_Name, image: x}]\n")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "c.yaml"), manifest("c"))
	h := newFileHarness(t, dir)
	h.sync(t)
	us := h.pending()
	if len(us) != 1 || names(us[0]) != "a-node,b-node" {
		t.Fatalf("got %+v", us)
	}
	if len(h.errs) != 1 || !strings.Contains(h.errs[0], "broken.yaml") || !strings.Contains(h.errs[0], "spec.containers[0].name") {
		t.Errorf("errors: %q", h.errs)
	}
	uidA := us[0].Pods[0].UID

	// a.yaml half-written: its pod stays, nothing is sent, the error names file and line.
	write(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: [")
	h.sync(t)
	if us := h.pending(); len(us) != 0 {
		t.Fatalf("half-written file changed the set: %+v", us)
	}
	if len(h.errs) != 2 || !strings.Contains(h.errs[1], "a.yaml") || !strings.Contains(h.errs[1], "line") {
		t.Errorf("errors: %q", h.errs)
	}
	// A change elsewhere resends the set with a's last good version.
	write(t, filepath.Join(dir, "c.yaml"), manifest("c"))
	h.sync(t)
	us = h.pending()
	if len(us) != 1 || names(us[0]) != "a-node,b-node,c-node" || us[0].Pods[0].UID != uidA {
		t.Fatalf("got %+v", us)
	}
	// Removing a file removes its pods.
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	h.sync(t)
	if us := h.pending(); len(us) != 1 || names(us[0]) != "b-node,c-node" {
		t.Fatalf("got %+v", us)
	}
}

func TestNewFileSourceValidates(t *testing.T) {
	out := make(chan kubetypes.PodUpdate)
	for _, cfg := range []FileSourceConfig{{NodeName: "n", Out: out}, {Path: "/x", Out: out}, {Path: "/x", NodeName: "n"}, {Path: "/x", NodeName: "n", Out: out, Period: -1}} {
		if _, err := NewFileSource(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func waitFor(t *testing.T, out <-chan kubetypes.PodUpdate, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-out:
			if names(u) == want {
				return
			}
		case <-deadline:
			t.Fatalf("no SET with %q within 10s", want)
		}
	}
}

func runSource(t *testing.T, h *fileHarness) chan error {
	done := make(chan error, 1)
	go func() { done <- h.src.Run(h.ctx) }()
	return done
}

func stopSource(t *testing.T, h *fileHarness, done chan error) {
	h.cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestWatchDirectory(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	h := newFileHarness(t, dir)
	done := runSource(t, h)
	waitFor(t, h.out, "")
	write(t, filepath.Join(dir, "p.yaml"), manifest("p"))
	waitFor(t, h.out, "p-node")
	if err := os.Rename(filepath.Join(dir, "p.yaml"), filepath.Join(dir, ".p.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h.out, "")
	stopSource(t, h, done)
}

func TestWatchFileChangedAndPeriod(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	h := newFileHarness(t, path)
	done := runSource(t, h)
	waitFor(t, h.out, "") // missing file: empty SET
	tmp := filepath.Join(dir, ".tmp")
	write(t, tmp, manifest("x"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h.out, "x-node")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h.out, "")
	stopSource(t, h, done)
}

// With nothing to watch (the parent directory is missing) the source polls
// on the injected clock, and starts watching once it can.
func TestPollingWhenWatchFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "pod.yaml")
	h := newFileHarness(t, path)
	done := runSource(t, h)
	waitFor(t, h.out, "")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, manifest("yy"))
	for !h.clk.HasWaiters() {
		// the ticker is registered before the first sync; this only guards the race with Run's start
		runtime.Gosched()
	}
	h.clk.Step(DefaultFilePeriod)
	waitFor(t, h.out, "yy-node")
	// Now watched: a change shows up without a tick.
	write(t, path, manifest("zz"))
	waitFor(t, h.out, "zz-node")
	stopSource(t, h, done)
}

// TestFileRemovedBetweenListAndRead: a manifest that is listed but gone
// when it is read (removed in a burst) counts as removed, not as broken, so
// its last good version is not kept.
func TestFileRemovedBetweenListAndRead(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, a, manifest("a"))
	write(t, b, manifest("b"))
	h := newFileHarness(t, dir)
	h.sync(t)
	if us := h.pending(); len(us) != 1 || names(us[0]) != "a-node,b-node" {
		t.Fatalf("first sync: %+v", us)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	// What scanLocked does for a name it listed before the removal.
	h.src.mu.Lock()
	gone := h.src.readFileLocked(b, fsutil.Stamp{})
	_, kept := h.src.files[b]
	h.src.mu.Unlock()
	if !gone {
		t.Error("a removed manifest was not reported gone")
	}
	if !kept {
		t.Fatal("test setup: b's state should still be there before the scan drops it")
	}
	if len(h.errs) != 0 {
		t.Errorf("a removed manifest was reported as an error: %q", h.errs)
	}
	h.sync(t)
	if us := h.pending(); len(us) != 1 || names(us[0]) != "a-node" {
		t.Fatalf("after the removal: %+v", us)
	}
}
