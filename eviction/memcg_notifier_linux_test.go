//go:build linux

package eviction_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/eviction"
)

// memcgV1Tree is a fake v1 memory cgroup: cgroup.event_control is a plain
// file, so a registration is the line written to it, and the test plays
// the kernel by signalling the eventfd named there.
type memcgV1Tree struct {
	t   *testing.T
	dir string
}

func (tr *memcgV1Tree) inactive(mi int64) {
	memcgWrite(tr.t, filepath.Join(tr.dir, "memory.stat"), "cache 1\nrss 2\ntotal_inactive_file "+strconv.FormatInt(mi*memcgMi, 10)+"\n")
}

// registration returns the eventfd and value last written to
// cgroup.event_control, and empties the file.
func (tr *memcgV1Tree) registration() (efd int, usage int64, ok bool) {
	tr.t.Helper()
	file := filepath.Join(tr.dir, "cgroup.event_control")
	b, err := os.ReadFile(file)
	if err != nil {
		tr.t.Fatal(err)
	}
	if len(b) == 0 {
		return -1, 0, false
	}
	memcgWrite(tr.t, file, "")
	f := strings.Fields(string(b))
	if len(f) != 3 {
		tr.t.Fatalf("event_control line %q", b)
	}
	efd, err1 := strconv.Atoi(f[0])
	usage, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		tr.t.Fatalf("event_control line %q", b)
	}
	return efd, usage, true
}

// pageUp is v rounded up to a page, as the notifier registers it.
func pageUp(v int64) int64 {
	p := int64(os.Getpagesize())
	return (v + p - 1) / p * p
}

func signalEventfd(t *testing.T, fd int) {
	t.Helper()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(fd, one[:]); err != nil {
		t.Fatalf("signalling eventfd %d: %v", fd, err)
	}
}

func fdClosed(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return errors.Is(err, unix.EBADF)
}

// TestMemcgV1Arm: UpdateThreshold registers capacity - threshold +
// total_inactive_file, registers again only when that value changed
// (closing the old eventfd), Run calls trigger when the current eventfd is
// signalled, and returning from Run releases the registration.
func TestMemcgV1Arm(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := t.TempDir()
	tr := &memcgV1Tree{t: t, dir: filepath.Join(root, "memory", "kubepods")}
	tr.inactive(100)
	memcgWrite(t, filepath.Join(tr.dir, "memory.usage_in_bytes"), "0\n")
	memcgWrite(t, filepath.Join(tr.dir, "cgroup.event_control"), "")
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
		Threshold: memcgThreshold(t, "allocatableMemory.available", "500Mi"), Cgroup: "kubepods", CgroupRoot: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	// Capacity 4096Mi: usage threshold 4096 - 500 + 100 = 3696Mi, plus a
	// byte, rounded up to a page.
	if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil {
		t.Fatal(err)
	}
	efd1, usage, ok := tr.registration()
	if !ok || usage != pageUp(3696*memcgMi+1) {
		t.Fatalf("registered %d (%v), want %d", usage, ok, (3696*memcgMi + 1))
	}
	if v, armed := n.Armed(); !armed || v != usage {
		t.Fatalf("Armed = %d, %v", v, armed)
	}
	// Same capacity split differently, same inactive: nothing to do.
	if err := n.UpdateThreshold(allocSummary(96, 4000)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tr.registration(); ok {
		t.Fatal("registered again with an unchanged value")
	}
	if fdClosed(efd1) {
		t.Fatal("eventfd closed without a re-arm")
	}

	triggers := make(chan struct{}, 10)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func() { triggers <- struct{}{} }) }()
	signalEventfd(t, efd1)
	<-triggers

	// inactive_file moved: a new registration while Run is waiting.
	tr.inactive(300)
	if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil {
		t.Fatal(err)
	}
	efd2, usage, ok := tr.registration()
	if !ok || usage != pageUp(3896*memcgMi+1) {
		t.Fatalf("re-registered %d (%v), want %d", usage, ok, (3896*memcgMi + 1))
	}
	if efd2 == efd1 || !fdClosed(efd1) {
		t.Fatalf("old eventfd %d not closed (new %d)", efd1, efd2)
	}
	signalEventfd(t, efd2)
	<-triggers

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if len(triggers) != 0 {
		t.Fatalf("%d extra triggers", len(triggers))
	}
	if _, armed := n.Armed(); armed || !fdClosed(efd2) {
		t.Fatal("registration kept after Run returned")
	}
	// Arming again after Run works.
	if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tr.registration(); !ok {
		t.Fatal("no registration after Run returned")
	}
}

// TestMemcgV1PendingCrossing: without cgroup.controllers the root is v1, and a
// crossing that happened before Run is reported once Run starts.
func TestMemcgV1PendingCrossing(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := t.TempDir()
	tr := &memcgV1Tree{t: t, dir: filepath.Join(root, "memory")}
	tr.inactive(0)
	memcgWrite(t, filepath.Join(tr.dir, "memory.usage_in_bytes"), "0\n")
	memcgWrite(t, filepath.Join(tr.dir, "cgroup.event_control"), "")
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{Threshold: memcgThreshold(t, "memory.available", "1Gi"), CgroupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.UpdateThreshold(&eviction.Summary{Memory: &eviction.MemoryStats{AvailableBytes: 3 << 30, WorkingSetBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	efd, usage, ok := tr.registration()
	if !ok || usage != pageUp(3<<30+1) {
		t.Fatalf("registered %d (%v), want %d", usage, ok, pageUp(3<<30+1))
	}
	signalEventfd(t, efd)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	triggered := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func() { triggered <- struct{}{} }) }()
	<-triggered
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

// TestMemcgV1RearmLosesNoCrossing: moving the registration triggers when
// the old eventfd had a signal nobody read, or when usage is over the new
// value while it was below the old one — and not again while it stays
// over.
func TestMemcgV1RearmLosesNoCrossing(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := t.TempDir()
	tr := &memcgV1Tree{t: t, dir: filepath.Join(root, "memory", "kubepods")}
	usage := func(mi int64) {
		memcgWrite(t, filepath.Join(tr.dir, "memory.usage_in_bytes"), strconv.FormatInt(mi*memcgMi, 10)+"\n")
	}
	tr.inactive(0)
	usage(3000)
	memcgWrite(t, filepath.Join(tr.dir, "cgroup.event_control"), "")
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
		Threshold: memcgThreshold(t, "allocatableMemory.available", "500Mi"), Cgroup: "kubepods", CgroupRoot: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil { // 3596Mi+1
		t.Fatal(err)
	}
	efd, _, _ := tr.registration()

	triggers := make(chan struct{}, 10)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func() { triggers <- struct{}{} }) }()

	// Usage 3400Mi: under the old value, over the new one (3396Mi+1).
	usage(3400)
	tr.inactive(0)
	if err := n.UpdateThreshold(allocSummary(896, 3000)); err != nil {
		t.Fatal(err)
	}
	<-triggers
	if !fdClosed(efd) {
		t.Fatal("old eventfd not closed")
	}
	if _, _, ok := tr.registration(); !ok {
		t.Fatal("not re-registered")
	}
	// Still over after another move: no new crossing.
	tr.inactive(1)
	if err := n.UpdateThreshold(allocSummary(896, 3000)); err != nil {
		t.Fatal(err)
	}
	efd2, _, ok := tr.registration()
	if !ok {
		t.Fatal("not re-registered")
	}
	// The kernel signalled the current eventfd just before the next move:
	// the signal moves with it even if Run has not read it yet (Run may or
	// may not have; exactly one trigger either way).
	usage(3000)
	signalEventfd(t, efd2)
	tr.inactive(2)
	if err := n.UpdateThreshold(allocSummary(896, 3000)); err != nil {
		t.Fatal(err)
	}
	<-triggers
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if len(triggers) != 0 {
		t.Fatalf("%d extra triggers (one per crossing wanted)", len(triggers))
	}
}
