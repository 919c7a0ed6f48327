package memorymanager

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

const gi = 1 << 30

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func machine2() []NUMANode {
	return []NUMANode{
		{ID: 0, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: 10 * gi, "hugepages-2Mi": gi}},
		{ID: 1, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: 10 * gi, "hugepages-2Mi": gi}},
	}
}

// TestValidateReservedMemory: the kubelet's table in our words.
func TestValidateReservedMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		alloc    v1.ResourceList
		reserved []Reservation
		err      string
	}{
		{"nothing reserved anywhere", nil, nil, ""},
		{"matching memory", rl("memory", "1Gi"), []Reservation{{0, rl("memory", "1Gi")}}, ""},
		{"split over nodes", rl("memory", "2Gi", "hugepages-2Mi", "4Mi"),
			[]Reservation{{0, rl("memory", "1Gi", "hugepages-2Mi", "2Mi")}, {1, rl("memory", "1Gi", "hugepages-2Mi", "2Mi")}}, ""},
		{"cpu in allocatable is ignored", rl("memory", "1Gi", "cpu", "1"), []Reservation{{0, rl("memory", "1Gi")}}, ""},
		{"unknown NUMA node", rl("memory", "1Gi"), []Reservation{{3, rl("memory", "1Gi")}}, "NUMA node 3"},
		{"memory differs", rl("memory", "2Gi"), []Reservation{{0, rl("memory", "1Gi")}}, `"1Gi" of type "memory" is not equal to the value "2Gi"`},
		{"reserved but not in allocatable", nil, []Reservation{{0, rl("memory", "1Gi")}}, `type "memory"`},
		{"hugepages missing", rl("memory", "1Gi", "hugepages-1Gi", "1Gi"), []Reservation{{0, rl("memory", "1Gi")}}, `type "hugepages-1Gi"`},
	} {
		err := ValidateReservedMemory(machine2(), tc.alloc, tc.reserved)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidReservedMemory) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

func newStatic(t testing.TB, dir string) *Manager {
	t.Helper()
	m, err := New(Config{Policy: PolicyStatic, Machine: machine2(), StateDir: dir,
		NodeAllocatableReservation: rl("memory", "2Gi"),
		ReservedMemory:             []Reservation{{0, rl("memory", "1Gi")}, {1, rl("memory", "1Gi")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

func gpod(uid string, mems ...string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), uid, "default"
	for i, mem := range mems {
		res := rl("cpu", "1", "memory", mem)
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)),
			Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}})
	}
	return p
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Policy: PolicyStatic, Machine: machine2()}, "StateDir"},
		{Config{Policy: "static", StateDir: "x"}, "Policy"},
		{Config{Policy: PolicyStatic, StateDir: "x"}, "Machine"},
		{Config{Policy: PolicyStatic, StateDir: "x", Machine: machine2()}, "ReservedMemory"},
		{Config{Policy: PolicyStatic, StateDir: "x", Machine: machine2(), NodeAllocatableReservation: rl("memory", "2Gi"),
			ReservedMemory: []Reservation{{0, rl("memory", "1Gi")}}}, "ReservedMemory"},
		{Config{Policy: PolicyStatic, StateDir: "x", Machine: machine2(), NodeAllocatableReservation: rl("memory", "20Gi"),
			ReservedMemory: []Reservation{{0, rl("memory", "20Gi")}}}, "exceeds"},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v", tc.cfg, err)
		}
	}
}

func TestStaticAllocation(t *testing.T) {
	dir := t.TempDir()
	m := newStatic(t, dir) // 9Gi allocatable memory and 1Gi of 2Mi pages per node
	// Best-effort and burstable pods hold nothing.
	bu := gpod("bu", "1Gi")
	bu.Spec.Containers[0].Resources.Requests = rl("memory", "512Mi")
	for _, p := range []*v1.Pod{{ObjectMeta: gpod("be").ObjectMeta, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}, bu} {
		if err := m.AllocatePod(p); err != nil || len(m.entries) != 0 {
			t.Fatalf("%s: %v, %d entries", p.UID, err, len(m.entries))
		}
	}
	// 6Gi fits node 0.
	if err := m.AllocatePod(gpod("a", "6Gi")); err != nil {
		t.Fatal(err)
	}
	if b := m.Blocks("a", "c0"); len(b) != 1 || len(b[0].NUMAAffinity) != 1 || b[0].NUMAAffinity[0] != 0 || b[0].Size != 6*gi {
		t.Fatalf("blocks %+v", b)
	}
	// 5Gi no longer fits node 0 (3Gi left): node 1.
	if err := m.AllocatePod(gpod("b", "5Gi")); err != nil {
		t.Fatal(err)
	}
	if b := m.Blocks("b", "c0"); b[0].NUMAAffinity[0] != 1 {
		t.Errorf("b on %v, want node 1", b[0].NUMAAffinity)
	}
	// Repeat: no-op.
	if err := m.AllocatePod(gpod("b", "5Gi")); err != nil || m.Free()[1][v1.ResourceMemory] != 4*gi {
		t.Errorf("repeat: %v, free %d", err, m.Free()[1][v1.ResourceMemory])
	}
	// 5Gi more: node 0 has 3Gi, node 1 has 4Gi, and both are in use by
	// single-node allocations, so no group may form: rejected.
	ok, reason, msg := m.Admit(gpod("c", "5Gi"), nil)
	if ok || reason != AdmitReason || !strings.Contains(msg, "no NUMA node can satisfy the request") {
		t.Errorf("Admit = %v %q %q", ok, reason, msg)
	}
	if len(m.entries) != 2 {
		t.Errorf("the rejected pod left state: %d pods", len(m.entries))
	}
	// Freed nodes may form a group: 15Gi spans both.
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod("b"); err != nil {
		t.Fatal(err)
	}
	if err := m.AllocatePod(gpod("d", "15Gi")); err != nil {
		t.Fatal(err)
	}
	if b := m.Blocks("d", "c0"); len(b[0].NUMAAffinity) != 2 {
		t.Errorf("d on %v, want both nodes", b[0].NUMAAffinity)
	}
	// A restart finds the same accounting.
	again := newStatic(t, dir)
	if again.Free()[0][v1.ResourceMemory] != 0 || again.Free()[1][v1.ResourceMemory] != 3*gi {
		t.Errorf("restored free %v", again.Free())
	}
}

func TestStartSetsAsideBadCheckpoints(t *testing.T) {
	for name, payload := range map[string]string{
		"other policy":  `{"policyName":"None"}`,
		"bad json":      `{"policyName":`,
		"unknown node":  `{"policyName":"Static","entries":{"u":{"c":[{"numaAffinity":[7],"type":"memory","size":1}]}}}`,
		"too big":       `{"policyName":"Static","entries":{"u":{"c":[{"numaAffinity":[0],"type":"memory","size":99999999999999}]}}}`,
		"no affinity":   `{"policyName":"Static","entries":{"u":{"c":[{"numaAffinity":[],"type":"memory","size":0}]}}}`,
		"unknown field": `{"policyName":"Static","machineState":{}}`,
	} {
		dir := t.TempDir()
		if err := checkpoint.Write(dir, StateFileName, []byte(payload)); err != nil {
			t.Fatal(err)
		}
		m := newStatic(t, dir)
		if len(m.entries) != 0 {
			t.Errorf("%s: %d entries", name, len(m.entries))
		}
		if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err != nil {
			t.Errorf("%s: not set aside: %v", name, err)
		}
	}
}

// failFS fails its n-th call.
type failFS struct {
	checkpoint.OS
	n, fail int
}

func (f *failFS) hit() bool { f.n++; return f.n == f.fail }
func (f *failFS) MkdirAll(d string, p fs.FileMode) error {
	if f.hit() {
		return errors.New("injected")
	}
	return f.OS.MkdirAll(d, p)
}
func (f *failFS) CreateTemp(d, p string) (checkpoint.File, error) {
	if f.hit() {
		return nil, errors.New("injected")
	}
	return f.OS.CreateTemp(d, p)
}
func (f *failFS) Rename(a, b string) error {
	if f.hit() {
		return errors.New("injected")
	}
	return f.OS.Rename(a, b)
}
func (f *failFS) SyncDir(d string) error {
	if f.hit() {
		return errors.New("injected")
	}
	return f.OS.SyncDir(d)
}

// TestCrashAtEachStep: a failed step leaves the old state in memory and on
// disk; a failure after the rename leaves the new one in both.
func TestCrashAtEachStep(t *testing.T) {
	for k := 1; k <= 4; k++ { // mkdir, create, rename, syncdir
		dir := t.TempDir()
		m := newStatic(t, dir)
		m.fs = &failFS{fail: k}
		err := m.AllocatePod(gpod("a", "1Gi"))
		again := newStatic(t, dir)
		onDisk := len(again.entries) == 1
		inMem := len(m.entries) == 1
		if onDisk != inMem || (err == nil) != inMem {
			t.Errorf("step %d: err %v, in memory %v, on disk %v", k, err, inMem, onDisk)
		}
	}
}

func TestReadMachine(t *testing.T) {
	root := t.TempDir()
	write := func(p, v string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:        7432404 kB\nNode 0 MemFree:  1 kB\n")
	write("sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "4\n")
	write("sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
	write("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:        1024 kB\n")
	nodes, err := ReadMachine(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Capacity[v1.ResourceMemory] != 7432404*1024 ||
		nodes[0].Capacity["hugepages-2Mi"] != 8<<20 || nodes[0].Capacity["hugepages-1Gi"] != 0 || nodes[1].Capacity[v1.ResourceMemory] != 1<<20 {
		t.Errorf("nodes %+v", nodes)
	}
	write("sys/devices/system/node/node1/meminfo", "garbage")
	if _, err := ReadMachine(root); !errors.Is(err, ErrMachine) {
		t.Errorf("bad meminfo: %v", err)
	}
	if _, err := ReadMachine(t.TempDir()); !errors.Is(err, ErrMachine) {
		t.Errorf("no nodes: %v", err)
	}
	if _, err := os.Stat("/sys/devices/system/node/node0/meminfo"); err == nil {
		if n, err := ReadMachine(""); err != nil || n[0].Capacity[v1.ResourceMemory] == 0 {
			t.Errorf("this machine: %v %v", n, err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"policyName":"Static","entries":{"u":{"c":[{"numaAffinity":[0],"type":"memory","size":1}]}}}`))
	f.Add([]byte(`{"policyName":"None"}`))
	f.Add([]byte(`{"entries":{"u":{"c":[{"numaAffinity":[-1,99999999],"size":18446744073709551615}]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := New(Config{Policy: PolicyStatic, Machine: machine2(), StateDir: "x",
			NodeAllocatableReservation: rl("memory", "1Gi"), ReservedMemory: []Reservation{{0, rl("memory", "1Gi")}}})
		if err != nil {
			t.Fatal(err)
		}
		_, entries, err := decodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		if used, err := m.used(entries); err == nil {
			for n, byType := range used {
				for name, u := range byType {
					if u > m.allocatable[n][name] {
						t.Fatalf("accepted state over-commits node %d %s", n, name)
					}
				}
			}
		}
	})
}
