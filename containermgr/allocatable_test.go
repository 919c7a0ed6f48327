package containermgr

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeAllocatableReservation(t *testing.T) {
	hundredMi := resource.MustParse("100Mi")
	capacity := rl("10", "10Gi")
	cases := []struct {
		name      string
		threshold []EvictionThreshold
		want      v1.ResourceList
	}{
		{"reserved only", nil, rl("150m", "150Mi")},
		{"plus a quantity threshold", []EvictionThreshold{{Signal: SignalMemoryAvailable, Quantity: &hundredMi}}, rl("150m", "250Mi")},
		// 5% as float32 times 10Gi in float64 is 536870920, 8 bytes over 512Mi.
		{"plus a percent threshold", []EvictionThreshold{{Signal: SignalMemoryAvailable, Percentage: 0.05}}, rl("150m", "694157320")},
		{"other signals reserve nothing", []EvictionThreshold{{Signal: "imagefs.available", Quantity: &hundredMi}}, rl("150m", "150Mi")},
	}
	for _, c := range cases {
		got := Reservation(capacity, rl("50m", "50Mi"), rl("100m", "100Mi"), c.threshold)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		for name, want := range c.want {
			g := got[name]
			if g.MilliValue() != want.MilliValue() {
				t.Errorf("%s: %s = %s, want %s", c.name, name, g.String(), want.String())
			}
		}
	}
	// ephemeral-storage from nodefs.available.
	storage := v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	got := Reservation(storage, nil, v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("150Mi")},
		[]EvictionThreshold{{Signal: SignalNodeFsAvailable, Percentage: 0.05}})
	if q := got[v1.ResourceEphemeralStorage]; q.Value() != 694157320 {
		t.Fatalf("ephemeral-storage reservation %d, want 694157320", q.Value())
	}
}

func TestReservationAboveCapacity(t *testing.T) {
	capacity := rl("2", "1Gi")
	res := Reservation(capacity, rl("1", "600Mi"), rl("500m", "600Mi"), nil)
	err := ValidateReservation(capacity, res)
	if !errors.Is(err, ErrReservationExceedsCapacity) {
		t.Fatalf("err = %v", err)
	}
	if ValidateReservation(capacity, Reservation(capacity, rl("1", "100Mi"), nil, nil)) != nil {
		t.Fatal("a fitting reservation was refused")
	}
	// The Manager refuses to start with it.
	m, err := New(Config{CgroupRoot: t.TempDir(), CgroupVersion: V1, Capacity: capacity, SystemReserved: rl("1", "600Mi"), KubeReserved: rl("500m", "600Mi")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); !errors.Is(err, ErrReservationExceedsCapacity) {
		t.Fatalf("Start: %v", err)
	}
}

func TestAllocatableAndEnforced(t *testing.T) {
	capacity := rl("4", "8Gi")
	capacity["hugepages-2Mi"] = resource.MustParse("1Gi")
	hundredMi := resource.MustParse("100Mi")
	th := []EvictionThreshold{{Signal: SignalMemoryAvailable, Quantity: &hundredMi}}
	alloc := Allocatable(capacity, Reservation(capacity, rl("500m", "1Gi"), rl("500m", "1Gi"), th))
	wantMem := resource.MustParse("8Gi")
	wantMem.Sub(resource.MustParse("2Gi"))
	wantMem.Sub(hundredMi)
	wantMem.Sub(resource.MustParse("1Gi")) // hugepages
	if q := alloc[v1.ResourceMemory]; q.Cmp(wantMem) != 0 {
		t.Errorf("allocatable memory %s, want %s", q.String(), wantMem.String())
	}
	if q := alloc[v1.ResourceCPU]; q.MilliValue() != 3000 {
		t.Errorf("allocatable cpu %s", q.String())
	}
	enf := EnforcedAllocatable(capacity, rl("500m", "1Gi"), rl("500m", "1Gi"))
	if q := enf[v1.ResourceMemory]; q.Value() != 6<<30 {
		t.Errorf("enforced memory %s, want 6Gi (no eviction threshold)", q.String())
	}
	// Never negative.
	if q := Allocatable(rl("1", "1Gi"), rl("2", "2Gi"))[v1.ResourceCPU]; q.Sign() != 0 {
		t.Errorf("negative allocatable %s", q.String())
	}
}

func TestMachineCapacity(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := MachineCapacity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q := c[v1.ResourceMemory]; q.Value() != 24576000*1024 {
		t.Fatalf("memory %s", q.String())
	}
	if q := c[v1.ResourceCPU]; q.Value() < 1 {
		t.Fatalf("cpu %s", q.String())
	}
	for _, bad := range []string{"MemFree: 1 kB\n", "MemTotal: x kB\n", "MemTotal: 99999999999999999999 kB\n"} {
		if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := MachineCapacity(dir); err == nil {
			t.Errorf("meminfo %q accepted", bad)
		}
	}
}

func TestResourceConfigForLimits(t *testing.T) {
	l := rl("3500m", "6Gi")
	l["pid"] = resource.MustParse("4096")
	rc := ResourceConfigForLimits(l)
	if *rc.CPUShares != 3584 || *rc.Memory != 6<<30 || *rc.PidsLimit != 4096 {
		t.Fatalf("%s", show(rc))
	}
	if ResourceConfigForLimits(nil) != nil {
		t.Fatal("nil list gave values")
	}
}
