package podconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

// A burst of queued file events is taken in one go, with the one that
// woke the loop first.
func TestDrainEvents(t *testing.T) {
	ch := make(chan fsnotify.Event, 4)
	for _, n := range []string{"b.yaml", "c.yaml"} {
		ch <- fsnotify.Event{Name: n, Op: fsnotify.Create}
	}
	batch, closed := drainEvents(ch, fsnotify.Event{Name: "a.yaml"})
	if closed || len(ch) != 0 || len(batch) != 3 || batch[0].Name != "a.yaml" || batch[2].Name != "c.yaml" {
		t.Fatalf("batch %v, closed %v, %d left", batch, closed, len(ch))
	}
	ch <- fsnotify.Event{Name: "d.yaml"}
	close(ch)
	if batch, closed := drainEvents(ch, fsnotify.Event{Name: "c.yaml"}); !closed || len(batch) != 2 {
		t.Fatalf("closed channel: batch %v, closed %v", batch, closed)
	}
}

func TestEventTargets(t *testing.T) {
	dir := t.TempDir()
	h := newFileHarness(t, dir)
	ev := func(name string, op fsnotify.Op) fsnotify.Event { return fsnotify.Event{Name: name, Op: op} }
	for _, tc := range []struct {
		name       string
		batch      []fsnotify.Event
		watching   bool
		named      []string
		scan, lost bool
	}{
		{"manifests under a watched directory", []fsnotify.Event{
			ev(filepath.Join(dir, "a.yaml"), fsnotify.Create), ev(filepath.Join(dir, ".a.tmp"), fsnotify.Rename),
			ev(filepath.Join(dir, "b.yaml"), fsnotify.Write), ev(filepath.Join(dir, "a.yaml"), fsnotify.Write),
		}, true, []string{"a.yaml", "b.yaml"}, false, false},
		{"the directory itself changed", []fsnotify.Event{ev(dir, fsnotify.Chmod)}, true, nil, true, false},
		{"the directory removed", []fsnotify.Event{ev(dir, fsnotify.Remove), ev(filepath.Join(dir, "a.yaml"), fsnotify.Remove)},
			true, []string{"a.yaml"}, true, true},
		{"the parent watched (Path a file or missing)", []fsnotify.Event{ev(filepath.Join(dir, "x"), fsnotify.Create)}, false, nil, true, false},
		{"only hidden names", []fsnotify.Event{ev(filepath.Join(dir, ".x"), fsnotify.Create)}, false, nil, false, false},
	} {
		named, scan, lost := h.src.eventTargets(tc.batch, tc.watching)
		var got []string
		for n := range named {
			got = append(got, filepath.Base(n))
			if filepath.Dir(n) != dir {
				t.Errorf("%s: %s is not under %s", tc.name, n, dir)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.named) || scan != tc.scan || lost != tc.lost {
			t.Errorf("%s: named %v scan %v lost %v; want %v %v %v", tc.name, got, scan, lost, tc.named, tc.scan, tc.lost)
		}
	}
}

// syncNamed reads the files it is given (even one whose metadata did not
// move: the event says it changed), drops the named ones that are gone,
// leaves the others alone and sends the whole set in file name order.
func TestSyncNamed(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yaml")
	write(t, a, manifest("a"))
	write(t, b, manifest("b"))
	h := newFileHarness(t, dir)
	h.sync(t)
	first := h.pending()
	reads := func() int { h.src.mu.Lock(); defer h.src.mu.Unlock(); return h.src.reads }
	before := reads()

	write(t, c, manifest("c"))
	write(t, b, manifest("bb")) // not named: left alone until a scan
	if err := h.src.syncNamed(h.ctx, map[string]struct{}{c: {}, a: {}}, false); err != nil {
		t.Fatal(err)
	}
	if n := reads() - before; n != 2 {
		t.Fatalf("read %d files, want the 2 named", n)
	}
	us := h.pending()
	if len(us) != 1 || names(us[0]) != "a-node,b-node,c-node" {
		t.Fatalf("sent %+v", us)
	}
	// b's manifest was not read again: its pod is the object sent before.
	if len(first) != 1 || first[0].Pods[1] != us[0].Pods[1] {
		t.Fatal("an unchanged manifest's pod was not sent as the same object")
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := h.src.syncNamed(h.ctx, map[string]struct{}{a: {}, b: {}}, false); err != nil {
		t.Fatal(err)
	}
	if us := h.pending(); len(us) != 1 || names(us[0]) != "bb-node,c-node" {
		t.Fatalf("after a's removal and b's change sent %+v", us)
	}
	// Named again with nothing changed: read, nothing sent.
	if err := h.src.syncNamed(h.ctx, map[string]struct{}{b: {}}, false); err != nil {
		t.Fatal(err)
	}
	if us := h.pending(); len(us) != 0 {
		t.Fatalf("an unchanged file sent %+v", us)
	}
}

// Manifests renamed into a watched directory in a burst are each read
// once, however the events are batched.
func TestWatchDirectoryBurstReadsEachFileOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	h := newFileHarness(t, dir)
	done := runSource(t, h)
	waitFor(t, h.out, "")
	const n = 20
	var want []string
	for i := range n {
		name := fmt.Sprintf("p%02d", i)
		tmp := filepath.Join(dir, "."+name)
		write(t, tmp, manifest(name))
		if err := os.Rename(tmp, filepath.Join(dir, name+".yaml")); err != nil {
			t.Fatal(err)
		}
		want = append(want, name+"-node")
	}
	waitFor(t, h.out, strings.Join(want, ","))
	h.src.mu.Lock()
	reads := h.src.reads
	h.src.mu.Unlock()
	stopSource(t, h, done)
	if reads != n {
		t.Fatalf("%d manifests renamed in took %d reads, want %d", n, reads, n)
	}
}

// A manifest written in place (os.WriteFile: truncate, then write) can be
// read between the two by the event of the truncate. That read is held,
// not reported: the write's event, or the recheck, reads the content.
func TestInPlaceWriteIsNoError(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, manifest("a"))
	h := newFileHarness(t, dir)
	h.sync(t)
	h.pending()
	named := map[string]struct{}{a: {}}

	write(t, a, "") // the truncate, seen by an event
	if err := h.src.syncNamed(h.ctx, named, true); err != nil {
		t.Fatal(err)
	}
	write(t, a, manifest("a2")) // the write
	if err := h.src.recheck(h.ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.errs) != 0 {
		t.Fatalf("errors reported for a manifest written in place: %q", h.errs)
	}
	us := h.pending()
	if len(us) != 1 || names(us[0]) != "a2-node" {
		t.Fatalf("updates %v, want one SET with a2-node", us)
	}
}

// A manifest that still fails at the recheck is reported, once, and its
// last good version keeps running; without hold (a periodic read, or Sync)
// a failure is reported at once.
func TestHeldFailureReportedAtRecheck(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, a, manifest("a"))
	h := newFileHarness(t, dir)
	h.sync(t)
	h.pending()

	write(t, a, "")
	for range 2 { // two events before the recheck: still held, not reported
		if err := h.src.syncNamed(h.ctx, map[string]struct{}{a: {}}, true); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.errs) != 0 {
		t.Fatalf("reported before the recheck: %q", h.errs)
	}
	if err := h.src.recheck(h.ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.errs) != 1 || !strings.Contains(h.errs[0], "empty manifest") {
		t.Fatalf("errors after the recheck %q, want one empty-manifest error", h.errs)
	}
	if us := h.pending(); len(us) != 0 {
		t.Fatalf("the last good version must keep running, got updates %v", us)
	}
	if err := h.src.recheck(h.ctx); err != nil || len(h.errs) != 1 {
		t.Fatalf("a second recheck with nothing held: err %v, errors %q", err, h.errs)
	}

	write(t, b, "kind: Pod\nmetadata: {name: Bad_Name}\n")
	h.sync(t)
	if len(h.errs) != 2 || !strings.Contains(h.errs[1], "b.yaml") {
		t.Fatalf("a full sync must report at once, errors %q", h.errs)
	}
}
