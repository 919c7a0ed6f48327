package cpumanager

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// restartFrom is a new manager over the same checkpoint directory, as
// after a crash: nothing of the old manager's memory survives.
func restartFrom(t *testing.T, dir string, active func() []*v1.Pod, ready *bool) *Manager {
	t.Helper()
	m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 2, 1), NumReservedCPUs: 1, StateDir: dir,
		SourcesReady: func() bool { return *ready }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), active); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRemovePodLostInCrash: a removal that never reached the checkpoint
// leaves a stale assignment that holds no CPU twice and is purged by the
// first Reconcile once the sources are ready, freeing the CPUs.
func TestRemovePodLostInCrash(t *testing.T) {
	dir := t.TempDir()
	gone, kept := pod("gone", true, "2"), pod("kept", true, "1")
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	for _, p := range []*v1.Pod{gone, kept} {
		if err := m.AllocatePod(p); err != nil {
			t.Fatal(err)
		}
	}
	goneCPUs, _ := m.GetCPUSet("gone", "c0")
	if err := m.RemovePod("gone"); err != nil {
		t.Fatal(err)
	}
	if got := m.DefaultCPUSet(); !goneCPUs.IsSubsetOf(got) {
		t.Fatalf("pool %s after RemovePod lacks %s", got, goneCPUs)
	}
	// Crash: no write after RemovePod.
	ready := false
	again := restartFrom(t, dir, func() []*v1.Pod { return []*v1.Pod{kept} }, &ready)
	if set, ok := again.GetCPUSet("gone", "c0"); !ok || !set.Equals(goneCPUs) {
		t.Fatalf("after the crash the lost removal should still be in the checkpoint: %s %v", set, ok)
	}
	if !again.DefaultCPUSet().Intersection(goneCPUs).IsEmpty() {
		t.Errorf("stale cpus %s are in the pool %s", goneCPUs, again.DefaultCPUSet())
	}
	// Sources not ready: nothing is purged yet.
	if err := again.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.GetCPUSet("gone", "c0"); !ok {
		t.Fatal("purged before the sources were ready")
	}
	ready = true
	if err := again.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.GetCPUSet("gone", "c0"); ok {
		t.Fatal("stale assignment of the removed pod survived the purge")
	}
	if got := again.DefaultCPUSet(); !goneCPUs.IsSubsetOf(got) {
		t.Errorf("pool %s after the purge lacks %s", got, goneCPUs)
	}
	keptCPUs, ok := again.GetCPUSet("kept", "c0")
	if !ok || keptCPUs.Size() != 1 {
		t.Errorf("active pod lost its cpus: %s %v", keptCPUs, ok)
	}
	// The purge was written.
	third := restartFrom(t, dir, nil, &ready)
	if _, ok := third.GetCPUSet("gone", "c0"); ok {
		t.Error("the purge was not written")
	}
}

// TestRemovePodWrittenWithNextAllocation: the allocation that reuses the
// freed CPUs writes the removal with it, so a crash right after never
// finds a CPU assigned twice.
func TestRemovePodWrittenWithNextAllocation(t *testing.T) {
	dir := t.TempDir()
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	if err := m.AllocatePod(pod("a", true, "4")); err != nil {
		t.Fatal(err)
	}
	aCPUs, _ := m.GetCPUSet("a", "c0")
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if err := m.AllocatePod(pod("b", true, "6")); err != nil { // needs a's cpus
		t.Fatal(err)
	}
	bCPUs, _ := m.GetCPUSet("b", "c0")
	if bCPUs.Intersection(aCPUs).IsEmpty() {
		t.Fatalf("b %s did not reuse a's cpus %s", bCPUs, aCPUs)
	}
	ready := true
	again := restartFrom(t, dir, nil, &ready)
	if _, ok := again.GetCPUSet("a", "c0"); ok {
		t.Error("the removal was not written with the next allocation")
	}
	if set, ok := again.GetCPUSet("b", "c0"); !ok || !set.Equals(bCPUs) {
		t.Errorf("b after restart: %s %v, want %s", set, ok, bCPUs)
	}
}

// TestRemovePodFlushedByReconcile: Reconcile (even before the sources
// are ready) and Flush write a pending removal; without one they write
// nothing.
func TestRemovePodFlushedByReconcile(t *testing.T) {
	dir := t.TempDir()
	ready := false
	m := restartFrom(t, dir, func() []*v1.Pod { return nil }, &ready)
	if err := m.AllocatePod(pod("a", true, "2")); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	again := restartFrom(t, dir, nil, &ready)
	if _, ok := again.GetCPUSet("a", "c0"); ok {
		t.Error("Reconcile did not write the pending removal")
	}
	if again.DefaultCPUSet().String() != "0-7" {
		t.Errorf("pool after restart %s", again.DefaultCPUSet())
	}
	if err := again.Flush(); err != nil {
		t.Errorf("Flush with nothing pending: %v", err)
	}
	unstarted := newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, t.TempDir())
	if err := unstarted.Flush(); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Flush before Start: %v", err)
	}
}

// TestRunWritesPendingRemoval: a removal made while Run runs is written
// at the next period, and one made just before Run returns is written as
// it returns.
func TestRunWritesPendingRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		fc := clocktesting.NewFakeClock(time.Unix(1e9, 0))
		m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 2, 1), NumReservedCPUs: 1,
			StateDir: dir, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		for _, uid := range []string{"a", "b"} {
			if err := m.AllocatePod(pod(uid, true, "2")); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		written := func(uid string) bool {
			t.Helper()
			ready := true
			again := restartFrom(t, dir, nil, &ready)
			_, ok := again.GetCPUSet(uid, "c0")
			return !ok
		}
		if err := m.RemovePod("a"); err != nil {
			t.Fatal(err)
		}
		if written("a") {
			t.Fatal("RemovePod wrote the checkpoint")
		}
		fc.Step(DefaultReconcilePeriod)
		synctest.Wait()
		if !written("a") {
			t.Error("the removal was not written at the next period")
		}
		if err := m.RemovePod("b"); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if !written("b") {
			t.Error("the removal was not written when Run returned")
		}
	})
}

// TestStartDropsAssignmentsOfGoneContainers: after a crash that lost a
// RemovePod, Start reconciles the restored state with the runtime's
// containers: the pods with no running container (the removed one, one
// whose containers all exited) get no exclusive CPU, those CPUs are back
// in the shared pool and written, and a pod whose containers run keeps its
// CPUs; all before the sources are ready.
func TestStartDropsAssignmentsOfGoneContainers(t *testing.T) {
	dir := t.TempDir()
	gone, exited, kept := pod("gone", true, "2"), pod("exited", true, "1"), withInit(pod("kept", true, "1"), "2", false)
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	for _, p := range []*v1.Pod{gone, exited, kept} {
		if err := m.AllocatePod(p); err != nil {
			t.Fatal(err)
		}
	}
	goneCPUs, _ := m.GetCPUSet("gone", "c0")
	exitedCPUs, _ := m.GetCPUSet("exited", "c0")
	keptCPUs, _ := m.GetCPUSet("kept", "c0")
	keptInit, _ := m.GetCPUSet("kept", "init")
	if err := m.RemovePod("gone"); err != nil {
		t.Fatal(err)
	}
	// Crash: the removal is not written.

	cri := &fakeCRI{}
	cri.add("k0", "kept", "c0", runtimeapi.ContainerState_CONTAINER_RUNNING)
	cri.add("ki", "kept", "init", runtimeapi.ContainerState_CONTAINER_EXITED)
	cri.add("e0", "exited", "c0", runtimeapi.ContainerState_CONTAINER_EXITED)
	again, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 2, 1), NumReservedCPUs: 1, StateDir: dir,
		Runtime: cri, SourcesReady: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(t.Context(), func() []*v1.Pod { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"gone", "exited"} {
		if set, ok := again.GetCPUSet(uid, "c0"); ok {
			t.Errorf("pod %s with no running container still holds cpus %s after Start", uid, set)
		}
	}
	pool := again.DefaultCPUSet()
	if !goneCPUs.Union(exitedCPUs).IsSubsetOf(pool) {
		t.Errorf("pool %s lacks the freed cpus %s and %s", pool, goneCPUs, exitedCPUs)
	}
	if set, ok := again.GetCPUSet("kept", "c0"); !ok || !set.Equals(keptCPUs) {
		t.Errorf("running container lost its cpus: %s %v, want %s", set, ok, keptCPUs)
	}
	if set, ok := again.GetCPUSet("kept", "init"); !ok || !set.Equals(keptInit) {
		t.Errorf("the running pod's init container lost its cpus: %s %v, want %s", set, ok, keptInit)
	}
	// Written: a restart without a runtime sees the same.
	ready := false
	third := restartFrom(t, dir, nil, &ready)
	if _, ok := third.GetCPUSet("gone", "c0"); ok {
		t.Error("the drop at Start was not written")
	}
}

// TestStartKeepsAssignmentsWhenListingFails: when the runtime can't list
// its containers at Start, the restored state is kept as it is.
func TestStartKeepsAssignmentsWhenListingFails(t *testing.T) {
	dir := t.TempDir()
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	if err := m.AllocatePod(pod("a", true, "2")); err != nil {
		t.Fatal(err)
	}
	cri := &fakeCRI{listErr: errInjected}
	again, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 2, 1), NumReservedCPUs: 1, StateDir: dir, Runtime: cri})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.GetCPUSet("a", "c0"); !ok {
		t.Error("assignment dropped although the runtime's containers are unknown")
	}
}
