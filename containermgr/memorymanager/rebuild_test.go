package memorymanager

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

func startWithPods(t *testing.T, dir string, machine []NUMANode, reserved []Reservation, pods ...*v1.Pod) *Manager {
	t.Helper()
	var total int64
	for _, r := range reserved {
		total += r.Limits.Memory().Value()
	}
	m, err := New(Config{Policy: PolicyStatic, Machine: machine, StateDir: dir,
		NodeAllocatableReservation: v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(total, resource.BinarySI)},
		ReservedMemory:             reserved})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.StartWithActivePods(t.Context(), func() []*v1.Pod { return pods }); err != nil {
		t.Fatal(err)
	}
	return m
}

func created(p *v1.Pod, sec int64) *v1.Pod {
	p.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0))
	return p
}

func TestRebuildFromActivePodsAfterCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if err := checkpoint.Write(dir, StateFileName, []byte(`{"policyName":"Static",`)); err != nil {
		t.Fatal(err)
	}
	// Node 0 and 1 each have 9Gi allocatable. a (oldest, 6Gi) goes to
	// node 0, b (8Gi) to node 1; c (20Gi) fits nowhere and is left out;
	// be is not Guaranteed.
	a, b, c := created(gpod("a", "6Gi"), 1), created(gpod("b", "8Gi"), 2), created(gpod("c", "20Gi"), 3)
	be := created(gpod("be", "1Gi"), 0)
	be.Spec.Containers[0].Resources.Limits = nil
	reserved := []Reservation{{0, rl("memory", "1Gi")}, {1, rl("memory", "1Gi")}}
	m := startWithPods(t, dir, machine2(), reserved, c, b, be, nil, a)
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err != nil {
		t.Errorf("corrupt checkpoint not set aside: %v", err)
	}
	if got := m.Blocks("a", "c0"); len(got) != 1 || !slices.Equal(got[0].NUMAAffinity, []int{0}) || got[0].Size != 6*gi {
		t.Errorf("a: %+v", got)
	}
	if got := m.Blocks("b", "c0"); len(got) != 1 || !slices.Equal(got[0].NUMAAffinity, []int{1}) {
		t.Errorf("b: %+v", got)
	}
	if got := m.Blocks("c", "c0"); got != nil {
		t.Errorf("c does not fit but was accounted: %+v", got)
	}
	if got := m.Blocks("be", "c0"); got != nil {
		t.Errorf("a BestEffort pod was accounted: %+v", got)
	}
	if free := m.Free(); free[0][v1.ResourceMemory] != 3*gi || free[1][v1.ResourceMemory] != gi {
		t.Errorf("free: %v", free)
	}
	// The rebuilt state was written: a plain restart reads it.
	again := newStatic(t, dir)
	if got := again.Blocks("b", "c0"); len(got) != 1 || got[0].Size != 8*gi {
		t.Errorf("after restart b: %+v", got)
	}
}

func TestRebuildSingleNUMAAndMissingCheckpoint(t *testing.T) {
	dir := t.TempDir()
	one := []NUMANode{{ID: 0, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: 4 * gi}}}
	reserved := []Reservation{{0, rl("memory", "1Gi")}}
	p := gpod("p", "1Gi", "512Mi")
	m := startWithPods(t, dir, one, reserved, p)
	for _, name := range []string{"c0", "c1"} {
		if got := m.Blocks("p", name); len(got) != 1 || !slices.Equal(got[0].NUMAAffinity, []int{0}) {
			t.Errorf("%s: %+v", name, got)
		}
	}
	if free := m.Free()[0][v1.ResourceMemory]; free != 3*gi-gi-gi/2 {
		t.Errorf("free %d", free)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err == nil {
		t.Error("a missing checkpoint was set aside")
	}
	// A valid checkpoint is trusted: a new active pod is not accounted.
	q := gpod("q", "1Gi")
	again := startWithPods(t, dir, one, reserved, p, q)
	if again.Blocks("q", "c0") != nil || again.Blocks("p", "c0") == nil {
		t.Errorf("valid checkpoint not taken as is: q %+v p %+v", again.Blocks("q", "c0"), again.Blocks("p", "c0"))
	}
}
