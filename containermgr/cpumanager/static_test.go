package cpumanager

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

func writeState(t *testing.T, dir, payload string) {
	t.Helper()
	if err := checkpoint.Write(dir, StateFileName, []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// TestStaticPolicyStart: what Start makes of the checkpoint it finds (the
// kubelet's corrupt-state table; where the kubelet refuses to start, we
// set the file aside and start fresh).
func TestStaticPolicyStart(t *testing.T) {
	// 1 socket, 4 cores, 2 threads: cpus 0-7, core c = {c, c+4}; 1 reserved = cpu 0.
	for _, tc := range []struct {
		name     string
		file     string // payload; "" = no file; "RAW:" prefix = raw bytes, no header
		wantSide bool
		wantDef  string
		wantPods int
	}{
		{name: "no checkpoint", wantDef: "0-7"},
		{name: "empty state is initialised", file: `{"policyName":"static","defaultCpuSet":""}`, wantDef: "0-7"},
		{name: "valid state restored", file: `{"policyName":"static","defaultCpuSet":"0,2-4,6-7","entries":{"u1":{"c0":"1,5"}}}`, wantDef: "0,2-4,6-7", wantPods: 1},
		{name: "assignments with empty default", file: `{"policyName":"static","defaultCpuSet":"","entries":{"u1":{"c0":"1,5"}}}`, wantSide: true, wantDef: "0-7"},
		{name: "reserved cpu not in default", file: `{"policyName":"static","defaultCpuSet":"2-7","entries":{"u1":{"c0":"0-1"}}}`, wantSide: true, wantDef: "0-7"},
		{name: "assignment overlaps default", file: `{"policyName":"static","defaultCpuSet":"0-7","entries":{"u1":{"c0":"1"}}}`, wantSide: true, wantDef: "0-7"},
		{name: "cpus missing", file: `{"policyName":"static","defaultCpuSet":"0-5"}`, wantSide: true, wantDef: "0-7"},
		{name: "cpus the machine lacks", file: `{"policyName":"static","defaultCpuSet":"0-7","entries":{"u1":{"c0":"8"}}}`, wantSide: true, wantDef: "0-7"},
		{name: "other policy", file: `{"policyName":"none","defaultCpuSet":""}`, wantSide: true, wantDef: "0-7"},
		{name: "unparsable default", file: `{"policyName":"static","defaultCpuSet":"0-a"}`, wantSide: true, wantDef: "0-7"},
		{name: "unparsable assignment", file: `{"policyName":"static","defaultCpuSet":"0-6","entries":{"u1":{"c0":"0-20000000"}}}`, wantSide: true, wantDef: "0-7"},
		{name: "bad json", file: `{"policyName":"static",`, wantSide: true, wantDef: "0-7"},
		{name: "unknown field", file: `{"policyName":"static","defaultCpuSet":"0-7","checksum":1}`, wantSide: true, wantDef: "0-7"},
		{name: "bad checksum", file: "RAW:NKC\x01garbage-garbage-garbage", wantSide: true, wantDef: "0-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			switch {
			case strings.HasPrefix(tc.file, "RAW:"):
				if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte(tc.file[4:]), 0o600); err != nil {
					t.Fatal(err)
				}
			case tc.file != "":
				writeState(t, dir, tc.file)
			}
			m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
			if got := m.DefaultCPUSet().String(); got != tc.wantDef {
				t.Errorf("default = %s, want %s", got, tc.wantDef)
			}
			if n := len(m.st.entries); n != tc.wantPods {
				t.Errorf("%d pods in the state, want %d", n, tc.wantPods)
			}
			_, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt"))
			if tc.wantSide != (err == nil) {
				t.Errorf("set aside = %v, want %v", err == nil, tc.wantSide)
			}
			// Whatever was found, the file now holds the running state.
			again := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
			if !again.DefaultCPUSet().Equals(m.DefaultCPUSet()) || len(again.st.entries) != tc.wantPods {
				t.Errorf("restart reads default %s, %d pods", again.DefaultCPUSet(), len(again.st.entries))
			}
		})
	}
}

func TestStartReadErrorIsReturned(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir, `{"policyName":"static","defaultCpuSet":"0-7"}`)
	m := newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir)
	m.fs = &stepFS{fail: 2} // Lstat passes, ReadFile fails: not a corrupt file
	if err := m.Start(t.Context(), nil); !errors.Is(err, errInjected) {
		t.Fatalf("Start = %v, want the read error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err == nil {
		t.Error("a readable-later file was set aside")
	}
}

// TestStaticPolicyAdd: which containers get exclusive cpus and which ones
// (the kubelet's add table in our topologies).
func TestStaticPolicyAdd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topo     [4]int
		reserved int
		before   []*v1.Pod // allocated first
		pod      *v1.Pod
		want     string // exclusive set of container c0; "" = shared pool
		wantErr  bool
	}{
		{name: "non-integral cpu: shared pool", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "1500m")},
		{name: "burstable: shared pool", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", false, "2")},
		{name: "no cpu request: shared pool", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "")},
		{name: "whole core first", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "2"), want: "1,5"},
		{name: "one cpu packs next to the reserved one", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "1"), want: "4"},
		{name: "three cpus: a core then a thread", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "3"), want: "1,4-5"},
		{name: "whole socket", topo: [4]int{2, 4, 2, 1}, reserved: 1, pod: pod("p", true, "8"), want: "4-7,12-15"},
		{name: "whole sub-socket NUMA node", topo: [4]int{1, 4, 2, 2}, reserved: 1, pod: pod("p", true, "4"), want: "2-3,6-7"},
		{name: "socket then cores", topo: [4]int{2, 4, 2, 1}, reserved: 1, pod: pod("p", true, "10"), want: "1,4-7,9,12-15"},
		{name: "no threads", topo: [4]int{1, 4, 1, 1}, reserved: 1, pod: pod("p", true, "2"), want: "1-2"},
		{name: "reserved never given", topo: [4]int{1, 4, 2, 1}, reserved: 2, pod: pod("p", true, "6"), want: "1-3,5-7"},
		{name: "shortage", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "8"), wantErr: true},
		{name: "shortage after others", topo: [4]int{1, 4, 2, 1}, reserved: 1, before: []*v1.Pod{pod("a", true, "4")}, pod: pod("p", true, "4"), wantErr: true},
		{name: "fits what is left", topo: [4]int{1, 4, 2, 1}, reserved: 1, before: []*v1.Pod{pod("a", true, "4")}, pod: pod("p", true, "3"), want: "3-4,7"},
		{name: "huge request", topo: [4]int{1, 4, 2, 1}, reserved: 1, pod: pod("p", true, "1e9"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustTopo(t, tc.topo[0], tc.topo[1], tc.topo[2], tc.topo[3])
			m := started(t, newStatic(t, topo, tc.reserved, t.TempDir()))
			for _, p := range tc.before {
				if err := m.AllocatePod(p); err != nil {
					t.Fatal(err)
				}
			}
			before := m.DefaultCPUSet()
			err := m.Allocate(tc.pod, &tc.pod.Spec.Containers[0])
			if tc.wantErr {
				if !errors.Is(err, ErrNotEnoughCPUs) || !strings.Contains(err.Error(), "not enough cpus available") {
					t.Fatalf("err = %v, want a shortage", err)
				}
				if !m.DefaultCPUSet().Equals(before) {
					t.Errorf("a failed allocation changed the pool: %s -> %s", before, m.DefaultCPUSet())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, excl := m.GetCPUSet(string(tc.pod.UID), "c0")
			if tc.want == "" {
				if excl || !got.Equals(before) {
					t.Errorf("got %s (exclusive %v), want the shared pool %s", got, excl, before)
				}
				return
			}
			if !excl || got.String() != tc.want {
				t.Errorf("got %s (exclusive %v), want %s", got, excl, tc.want)
			}
			if !got.Intersection(m.ReservedCPUs()).IsEmpty() {
				t.Errorf("got reserved cpus %s", got.Intersection(m.ReservedCPUs()))
			}
			if !m.DefaultCPUSet().Equals(before.Difference(got)) {
				t.Errorf("pool %s, want %s", m.DefaultCPUSet(), before.Difference(got))
			}
		})
	}
}

func TestRepeatAllocateIsNoOp(t *testing.T) {
	dir := t.TempDir()
	m := newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir)
	fsys := &stepFS{}
	m.fs = fsys
	started(t, m)
	p := pod("p", true, "2")
	if err := m.Allocate(p, &p.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	first, _ := m.GetCPUSet("p", "c0")
	calls := fsys.calls()
	for range 3 {
		if err := m.Allocate(p, &p.Spec.Containers[0]); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := m.Admit(p, nil); !ok {
			t.Fatal("re-admission rejected")
		}
	}
	if again, _ := m.GetCPUSet("p", "c0"); !again.Equals(first) {
		t.Errorf("repeat gave %s, first %s", again, first)
	}
	if fsys.calls() != calls {
		t.Errorf("repeat allocations wrote the checkpoint (%d more file calls)", fsys.calls()-calls)
	}
}

func TestInitContainerCPUsReused(t *testing.T) {
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, t.TempDir()))
	p := withInit(pod("p", true, "2"), "2", false)
	if err := m.AllocatePod(p); err != nil {
		t.Fatal(err)
	}
	init, _ := m.GetCPUSet("p", "init")
	app, _ := m.GetCPUSet("p", "c0")
	if !init.Equals(app) || init.Size() != 2 {
		t.Fatalf("init %s, app %s: the app container should reuse the init container's cpus", init, app)
	}
	if m.DefaultCPUSet().Size() != 6 {
		t.Errorf("pool %s: the pod should hold 2 cpus", m.DefaultCPUSet())
	}
	// Removing the init container keeps the cpus the app container holds.
	if err := m.RemoveContainer("p", "init"); err != nil {
		t.Fatal(err)
	}
	if m.DefaultCPUSet().Size() != 6 {
		t.Errorf("pool %s after removing init: the app's cpus were released", m.DefaultCPUSet())
	}
	if err := m.RemoveContainer("p", "c0"); err != nil {
		t.Fatal(err)
	}
	if m.DefaultCPUSet().String() != "0-7" || len(m.st.entries) != 0 {
		t.Errorf("pool %s, %d pods after removing all", m.DefaultCPUSet(), len(m.st.entries))
	}

	// A sidecar (restartable init container) runs beside the app: no reuse.
	s := withInit(pod("s", true, "2"), "2", true)
	if err := m.AllocatePod(s); err != nil {
		t.Fatal(err)
	}
	side, _ := m.GetCPUSet("s", "init")
	app, _ = m.GetCPUSet("s", "c0")
	if !side.Intersection(app).IsEmpty() {
		t.Errorf("sidecar %s and app %s share cpus", side, app)
	}
}

func TestRemovePodAndContainer(t *testing.T) {
	dir := t.TempDir()
	m := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	p := pod("p", true, "2", "1", "500m")
	if err := m.AllocatePod(p); err != nil {
		t.Fatal(err)
	}
	if m.DefaultCPUSet().Size() != 5 {
		t.Fatalf("pool %s", m.DefaultCPUSet())
	}
	if err := m.RemoveContainer("p", "c1"); err != nil {
		t.Fatal(err)
	}
	if m.DefaultCPUSet().Size() != 6 {
		t.Errorf("pool %s after RemoveContainer", m.DefaultCPUSet())
	}
	if err := m.RemoveContainer("p", "nope"); err != nil {
		t.Errorf("unknown container: %v", err)
	}
	if err := m.RemovePod("p"); err != nil {
		t.Fatal(err)
	}
	if m.DefaultCPUSet().String() != "0-7" {
		t.Errorf("pool %s after RemovePod", m.DefaultCPUSet())
	}
	if err := m.RemovePod("p"); err != nil {
		t.Errorf("second RemovePod: %v", err)
	}
	// RemovePod leaves the write to the next change or Flush.
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	again := started(t, newStatic(t, mustTopo(t, 1, 4, 2, 1), 1, dir))
	if again.DefaultCPUSet().String() != "0-7" || len(again.st.entries) != 0 {
		t.Errorf("checkpoint after removal: %s, %d pods", again.DefaultCPUSet(), len(again.st.entries))
	}
}

// TestCheckpointStateRestore: a restarted manager finds the assignments
// and pool as they were, and keeps allocating around them.
func TestCheckpointStateRestore(t *testing.T) {
	dir := t.TempDir()
	topo := mustTopo(t, 2, 4, 2, 1)
	m := started(t, newStatic(t, topo, 2, dir))
	pods := []*v1.Pod{pod("a", true, "2"), pod("b", true, "1", "3"), withInit(pod("c", true, "1"), "2", false)}
	for _, p := range pods {
		if err := m.AllocatePod(p); err != nil {
			t.Fatal(err)
		}
	}
	again := started(t, newStatic(t, topo, 2, dir))
	if !again.DefaultCPUSet().Equals(m.DefaultCPUSet()) {
		t.Errorf("default %s, want %s", again.DefaultCPUSet(), m.DefaultCPUSet())
	}
	for _, p := range pods {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			want, _ := m.GetCPUSet(string(p.UID), c.Name)
			got, _ := again.GetCPUSet(string(p.UID), c.Name)
			if !got.Equals(want) {
				t.Errorf("%s/%s: %s, want %s", p.UID, c.Name, got, want)
			}
		}
	}
	d := pod("d", true, "2")
	if err := again.AllocatePod(d); err != nil {
		t.Fatal(err)
	}
	got, _ := again.GetCPUSet("d", "c0")
	if !got.Intersection(m.st.exclusive()).IsEmpty() {
		t.Errorf("new allocation %s overlaps restored ones %s", got, m.st.exclusive())
	}
	// A different reservation makes the old file inconsistent: set aside.
	other := started(t, newStatic(t, topo, 0+4, dir))
	if len(other.st.entries) != 0 || other.DefaultCPUSet().Size() != 16 {
		t.Errorf("with another reservation: %d pods, pool %s", len(other.st.entries), other.DefaultCPUSet())
	}
}

// TestCrashAtEveryStep fails each file-system call of an allocation in turn
// (and, in the "dead" variant, every call after it, as if the process had
// died there) and checks that a restart reads the old or the new state,
// whole, and the new one whenever Allocate had reported success.
func TestCrashAtEveryStep(t *testing.T) {
	topo := mustTopo(t, 1, 4, 2, 1)
	for _, dead := range []bool{false, true} {
		for k := 1; ; k++ {
			dir := t.TempDir()
			m := started(t, newStatic(t, topo, 1, dir))
			first := pod("a", true, "2")
			if err := m.AllocatePod(first); err != nil {
				t.Fatal(err)
			}
			oldDef := m.DefaultCPUSet()
			fsys := &stepFS{fail: k, dead: dead}
			m.fs = fsys
			p := pod("p", true, "3")
			err := m.AllocatePod(p)
			if fsys.calls() < k {
				if k < 8 { // mkdir, create, write, sync, close, rename, syncdir
					t.Fatalf("only %d file calls in an allocation", k-1)
				}
				break // every step has had its turn
			}
			restart := started(t, newStatic(t, topo, 1, dir))
			got, gotExcl := restart.GetCPUSet("p", "c0")
			isNew := gotExcl && got.Size() == 3 && restart.DefaultCPUSet().Equals(oldDef.Difference(got))
			isOld := !gotExcl && restart.DefaultCPUSet().Equals(oldDef) && len(restart.st.entries) == 1
			if !isNew && !isOld {
				t.Fatalf("dead=%v step %d: restart found neither state: pool %s, p=%s", dead, k, restart.DefaultCPUSet(), got)
			}
			if err == nil && !isNew {
				t.Errorf("dead=%v step %d: Allocate succeeded but a restart finds the old state", dead, k)
			}
			if !dead && err != nil {
				if !isOld {
					t.Errorf("step %d: Allocate failed (%v) but the new state is on disk", k, err)
				}
				if _, ok := m.GetCPUSet("p", "c0"); ok {
					t.Errorf("step %d: Allocate failed but the container holds cpus in memory", k)
				}
			}
			if _, serr := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); serr == nil {
				t.Errorf("dead=%v step %d: the restart found a corrupt file", dead, k)
			}
		}
	}
}

func TestNonePolicy(t *testing.T) {
	dir := t.TempDir()
	m, err := New(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	started(t, m)
	p := pod("p", true, "2")
	if err := m.Allocate(p, &p.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := m.Admit(p, nil); !ok {
		t.Error("none policy rejected a pod")
	}
	if s, ok := m.ContainerCPUSet(p, &p.Spec.Containers[0]); ok || s != "" {
		t.Errorf("none policy pins %q", s)
	}
	if err := m.Reconcile(t.Context()); err != nil {
		t.Error(err)
	}
	// The static policy finds the none checkpoint foreign: set aside.
	s := started(t, newStatic(t, mustTopo(t, 1, 2, 1, 1), 1, dir))
	if s.DefaultCPUSet().String() != "0-1" {
		t.Errorf("pool %s", s.DefaultCPUSet())
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err != nil {
		t.Errorf("none checkpoint not set aside: %v", err)
	}
}

func TestNotStarted(t *testing.T) {
	m := newStatic(t, mustTopo(t, 1, 2, 1, 1), 1, t.TempDir())
	p := pod("p", true, "1")
	if err := m.Allocate(p, &p.Spec.Containers[0]); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Allocate = %v", err)
	}
	if ok, reason, _ := m.Admit(p, nil); ok || reason != AdmitReason {
		t.Errorf("Admit = %v %s", ok, reason)
	}
	if _, ok := m.ContainerCPUSet(p, &p.Spec.Containers[0]); ok {
		t.Error("ContainerCPUSet before Start")
	}
	for _, err := range []error{m.RemoveContainer("p", "c0"), m.RemovePod("p"), m.Reconcile(t.Context())} {
		if !errors.Is(err, ErrNotStarted) {
			t.Errorf("got %v", err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	topo := mustTopo(t, 1, 2, 2, 1)
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no dir", Config{Policy: PolicyStatic, Topology: topo, NumReservedCPUs: 1}, "StateDir"},
		{"bad policy", Config{Policy: "dynamic", StateDir: "x"}, "Policy"},
		{"no topology", Config{Policy: PolicyStatic, StateDir: "x", NumReservedCPUs: 1}, "Topology"},
		{"no reservation", Config{Policy: PolicyStatic, Topology: topo, StateDir: "x"}, "reserved"},
		{"negative reservation", Config{Policy: PolicyStatic, Topology: topo, StateDir: "x", NumReservedCPUs: -1}, "NumReservedCPUs"},
		{"too many reserved", Config{Policy: PolicyStatic, Topology: topo, StateDir: "x", NumReservedCPUs: 5}, "NumReservedCPUs"},
		{"reserved off machine", Config{Policy: PolicyStatic, Topology: topo, StateDir: "x", ReservedCPUs: set("9")}, "ReservedCPUs"},
		{"sizes disagree", Config{Policy: PolicyStatic, Topology: topo, StateDir: "x", ReservedCPUs: set("0"), NumReservedCPUs: 2}, "ReservedCPUs"},
		{"negative period", Config{StateDir: "x", ReconcilePeriod: -1}, "ReconcilePeriod"},
	} {
		_, err := New(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 2, 2, 1), StateDir: "x", NumReservedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Two reserved on a hyper-threaded machine: both threads of core 0.
	if m.ReservedCPUs().String() != "0,2" {
		t.Errorf("reserved %s, want 0,2", m.ReservedCPUs())
	}
	m, _ = New(Config{Policy: PolicyStatic, Topology: topo, StateDir: "x", ReservedCPUs: set("3")})
	if m.ReservedCPUs().String() != "3" {
		t.Errorf("explicit reserved %s", m.ReservedCPUs())
	}
}
