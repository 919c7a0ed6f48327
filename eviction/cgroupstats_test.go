package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// tree writes files (path relative to root -> content) under root.
func tree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	gi = uint64(1) << 30
)

func procTree(t *testing.T) string {
	proc := t.TempDir()
	tree(t, proc, map[string]string{
		"meminfo":                "MemTotal:        8388608 kB\nMemFree:         1000 kB\n",
		"sys/kernel/pid_max":     "4194304\n",
		"sys/kernel/threads-max": "100000\n",
		"loadavg":                "0.50 0.40 0.30 3/612 12345\n",
	})
	return proc
}

func fakeStatfs(m map[string]*FsStats) func(string) (*FsStats, error) {
	return func(p string) (*FsStats, error) {
		if s, ok := m[p]; ok {
			v := *s
			return &v, nil
		}
		return nil, &fs.PathError{Op: "statfs", Path: p, Err: fs.ErrNotExist}
	}
}

func newTestStats(t *testing.T, cfg CgroupStatsConfig) *CgroupStats {
	t.Helper()
	s, err := NewCgroupStats(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.statfs = fakeStatfs(map[string]*FsStats{
		"/node":  {AvailableBytes: 10 * gi, CapacityBytes: 100 * gi, InodesFree: 500, Inodes: 1000},
		"/image": {AvailableBytes: 20 * gi, CapacityBytes: 200 * gi, InodesFree: 700, Inodes: 2000},
	})
	return s
}

func podsByUID(ps []PodStats) map[types.UID]PodStats {
	m := map[types.UID]PodStats{}
	for _, p := range ps {
		m[p.UID] = p
	}
	return m
}

func TestCgroupStatsV1(t *testing.T) {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		// Root: usage 3Gi, inactive file 1Gi -> working set 2Gi.
		"memory/memory.usage_in_bytes": "3221225472\n",
		"memory/memory.stat":           "cache 5\ninactive_file 7\ntotal_inactive_file 1073741824\n",
		// Pods cgroup: usage 1.5Gi, inactive 0.5Gi -> 1Gi; limit 6Gi.
		"memory/kubepods/memory.usage_in_bytes": "1610612736\n",
		"memory/kubepods/memory.stat":           "total_inactive_file 536870912\n",
		"memory/kubepods/memory.limit_in_bytes": "6442450944\n",
		// Guaranteed pod directly under kubepods.
		"memory/kubepods/poda-1/memory.usage_in_bytes": "1000\n",
		"memory/kubepods/poda-1/memory.stat":           "total_inactive_file 300\n",
		"pids/kubepods/poda-1/pids.current":            "4\n",
		// Burstable pod, no pids controller: count cgroup.procs.
		"memory/kubepods/burstable/podb-2/memory.usage_in_bytes":   "5000\n",
		"memory/kubepods/burstable/podb-2/memory.stat":             "total_inactive_file 6000\n", // more inactive than usage: 0
		"memory/kubepods/burstable/podb-2/cgroup.procs":            "",
		"memory/kubepods/burstable/podb-2/ctr1/cgroup.procs":       "10\n11\n",
		"memory/kubepods/burstable/podb-2/ctr2/cgroup.procs":       "12\n",
		"memory/kubepods/burstable/memory.usage_in_bytes":          "1\n",
		"memory/kubepods/besteffort/podc-3/memory.usage_in_bytes":  "2048\n",
		"memory/kubepods/besteffort/podc-3/memory.stat":            "total_inactive_file 48\n",
		"pids/kubepods/besteffort/podc-3/pids.current":             "1\n",
		"memory/kubepods/besteffort/notapod/memory.usage_in_bytes": "1\n",
	})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: cg, PodsCgroup: "/kubepods/", ProcRoot: procTree(t),
		NodeFsPath: "/node", ImageFsPath: "/image", Clock: clocktesting.NewFakeClock(now),
	})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Time.Equal(now) {
		t.Errorf("Time = %v, want %v", sum.Time, now)
	}
	if want := (MemoryStats{AvailableBytes: 6 * gi, WorkingSetBytes: 2 * gi}); *sum.Memory != want {
		t.Errorf("Memory = %+v, want %+v", *sum.Memory, want)
	}
	if want := (MemoryStats{AvailableBytes: 5 * gi, WorkingSetBytes: gi}); *sum.AllocatableMemory != want {
		t.Errorf("AllocatableMemory = %+v, want %+v", *sum.AllocatableMemory, want)
	}
	pods := podsByUID(sum.Pods)
	if len(pods) != 3 {
		t.Fatalf("pods = %+v, want a-1, b-2, c-3", sum.Pods)
	}
	for uid, want := range map[types.UID][2]uint64{"a-1": {700, 4}, "b-2": {0, 3}, "c-3": {2000, 1}} {
		p := pods[uid]
		if p.MemoryWorkingSetBytes != want[0] || p.Processes != want[1] {
			t.Errorf("pod %s = ws %d procs %d, want %d %d", uid, p.MemoryWorkingSetBytes, p.Processes, want[0], want[1])
		}
	}
	if sum.NodeFs == nil || sum.NodeFs.AvailableBytes != 10*gi || sum.NodeFs.Inodes != 1000 {
		t.Errorf("NodeFs = %+v", sum.NodeFs)
	}
	if sum.ImageFs == nil || sum.ImageFs.CapacityBytes != 200*gi || sum.ImageFs.InodesFree != 700 {
		t.Errorf("ImageFs = %+v", sum.ImageFs)
	}
	if want := (PIDStats{MaxPID: 100000, NumProcesses: 612}); *sum.PID != want {
		t.Errorf("PID = %+v, want %+v", *sum.PID, want)
	}
}

func TestCgroupStatsV2(t *testing.T) {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		"cgroup.controllers": "cpuset cpu io memory pids\n",
		// The v2 root has no memory.current: anon+file (2Gi+2Gi) minus
		// inactive_file (1Gi) = 3Gi.
		"memory.stat": "anon 2147483648\nfile 2147483648\ninactive_file 1073741824\nactive_file 1\n",
		// kubepods.slice with systemd names; memory.max "max" -> MemTotal.
		"kubepods.slice/memory.current":                                                          "2147483648\n",
		"kubepods.slice/memory.stat":                                                             "inactive_file 1073741824\n",
		"kubepods.slice/memory.max":                                                              "max\n",
		"kubepods.slice/kubepods-poda_1.slice/memory.current":                                    "4096\n",
		"kubepods.slice/kubepods-poda_1.slice/memory.stat":                                       "inactive_file 96\ntotal_inactive_file 4000\n",
		"kubepods.slice/kubepods-poda_1.slice/pids.current":                                      "7\n",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_2.slice/memory.current": "100\n",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_2.slice/memory.stat":    "inactive_file 0\n",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_2.slice/pids.current":   "2\n",
		"kubepods.slice/kubepods-burstable.slice/memory.current":                                 "100\n",
	})
	s := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, PodsCgroup: "kubepods.slice", ProcRoot: procTree(t), NodeFsPath: "/node"})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (MemoryStats{AvailableBytes: 5 * gi, WorkingSetBytes: 3 * gi}); *sum.Memory != want {
		t.Errorf("Memory = %+v, want %+v", *sum.Memory, want)
	}
	if want := (MemoryStats{AvailableBytes: 7 * gi, WorkingSetBytes: gi}); *sum.AllocatableMemory != want {
		t.Errorf("AllocatableMemory = %+v, want %+v (capacity capped at MemTotal)", *sum.AllocatableMemory, want)
	}
	pods := podsByUID(sum.Pods)
	if len(pods) != 2 || pods["a-1"].MemoryWorkingSetBytes != 4000 || pods["a-1"].Processes != 7 ||
		pods["b-2"].MemoryWorkingSetBytes != 100 || pods["b-2"].Processes != 2 {
		t.Errorf("pods = %+v", sum.Pods)
	}
	if sum.NodeFs == nil || sum.ImageFs != nil {
		t.Errorf("NodeFs = %+v, ImageFs = %+v; want nodefs only", sum.NodeFs, sum.ImageFs)
	}

	// AllocatableMemoryBytes overrides the limit; working set above it
	// leaves nothing available, never a negative amount.
	s2 := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, PodsCgroup: "kubepods.slice", ProcRoot: s.cfg.ProcRoot, AllocatableMemoryBytes: gi / 2})
	sum, err = s2.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (MemoryStats{AvailableBytes: 0, WorkingSetBytes: gi}); *sum.AllocatableMemory != want {
		t.Errorf("AllocatableMemory = %+v, want %+v", *sum.AllocatableMemory, want)
	}
	if sum.NodeFs != nil {
		t.Errorf("NodeFs = %+v without NodeFsPath", sum.NodeFs)
	}
}

func TestCgroupStatsNoPodsCgroup(t *testing.T) {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		"memory/memory.usage_in_bytes": "100\n",
		"memory/memory.stat":           "total_inactive_file 10\n",
	})
	proc := procTree(t)
	os.Remove(filepath.Join(proc, "sys/kernel/threads-max")) // optional
	s := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, ProcRoot: proc})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sum.AllocatableMemory != nil || sum.Pods != nil || sum.NodeFs != nil {
		t.Errorf("got pod/allocatable/fs stats without their config: %+v", sum)
	}
	if sum.Memory.WorkingSetBytes != 90 || sum.PID.MaxPID != 4194304 {
		t.Errorf("Memory = %+v, PID = %+v", sum.Memory, sum.PID)
	}
}

func TestCgroupStatsErrors(t *testing.T) {
	good := map[string]string{
		"memory/memory.usage_in_bytes":          "100\n",
		"memory/memory.stat":                    "total_inactive_file 10\n",
		"memory/kubepods/memory.usage_in_bytes": "100\n",
		"memory/kubepods/memory.stat":           "total_inactive_file 10\n",
		"memory/kubepods/memory.limit_in_bytes": "1000\n",
	}
	for _, tc := range []struct {
		name     string
		drop     string // cgroup file removed
		set      map[string]string
		dropProc string
		want     string
		notExist bool
	}{
		{name: "no cgroup", drop: "memory/memory.usage_in_bytes", want: "nor v1 memory controller", notExist: true},
		{name: "no root memory.stat", drop: "memory/memory.stat", want: "root memory cgroup", notExist: true},
		{name: "no pods cgroup", drop: "memory/kubepods/memory.usage_in_bytes", want: "pods cgroup", notExist: true},
		{name: "bad usage", set: map[string]string{"memory/memory.usage_in_bytes": "lots\n"}, want: "not a number"},
		{name: "bad stat", set: map[string]string{"memory/memory.stat": "total_inactive_file -1\n"}, want: "not a number"},
		{name: "bad limit", set: map[string]string{"memory/kubepods/memory.limit_in_bytes": "x\n"}, want: "not a number"},
		{name: "no meminfo", dropProc: "meminfo", want: "MemTotal", notExist: true},
		{name: "no pid_max", dropProc: "sys/kernel/pid_max", want: "pid_max", notExist: true},
		{name: "no loadavg", dropProc: "loadavg", want: "number of processes", notExist: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, proc := t.TempDir(), procTree(t)
			tree(t, cg, good)
			tree(t, cg, tc.set)
			if tc.drop != "" {
				os.Remove(filepath.Join(cg, tc.drop))
			}
			if tc.dropProc != "" {
				os.Remove(filepath.Join(proc, tc.dropProc))
			}
			s := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, ProcRoot: proc, PodsCgroup: "kubepods"})
			_, err := s.Summary(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if tc.notExist != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v", err, !tc.notExist)
			}
		})
	}
	for _, bad := range []string{"meminfo", "loadavg"} {
		t.Run("garbled "+bad, func(t *testing.T) {
			cg, proc := t.TempDir(), procTree(t)
			tree(t, cg, good)
			tree(t, proc, map[string]string{bad: "MemTotal: many kB\n1 2 3 x/y\n"})
			s := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, ProcRoot: proc})
			if _, err := s.Summary(t.Context()); err == nil || !strings.Contains(err.Error(), filepath.Join(proc, bad)) {
				t.Fatalf("err = %v, want one naming %s", err, bad)
			}
		})
	}
}

// A pod cgroup that is listed but gone (or half gone) when read is skipped.
func TestCgroupStatsVanishingPod(t *testing.T) {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		"memory/memory.usage_in_bytes":                  "100\n",
		"memory/memory.stat":                            "total_inactive_file 10\n",
		"memory/kubepods/memory.usage_in_bytes":         "100\n",
		"memory/kubepods/memory.stat":                   "\n",
		"memory/kubepods/memory.limit_in_bytes":         "1000\n",
		"memory/kubepods/podgone/memory.stat":           "\n", // usage file already removed
		"memory/kubepods/podhere/memory.usage_in_bytes": "50\n",
		"memory/kubepods/podhere/memory.stat":           "\n",
		"pids/kubepods/podhere/pids.current":            "1\n",
	})
	s := newTestStats(t, CgroupStatsConfig{CgroupRoot: cg, ProcRoot: procTree(t), PodsCgroup: "kubepods"})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].UID != "here" || sum.Pods[0].MemoryWorkingSetBytes != 50 {
		t.Errorf("pods = %+v, want only 'here'", sum.Pods)
	}
}

func TestNewCgroupStatsValidates(t *testing.T) {
	for _, cfg := range []CgroupStatsConfig{
		{CgroupRoot: "relative"},
		{ProcRoot: "proc"},
		{PodsCgroup: "../escape"},
		{PodsCgroup: "/"},
		{ImageFsPath: "/image"},
	} {
		if _, err := NewCgroupStats(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewCgroupStats(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	s, err := NewCgroupStats(CgroupStatsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.CgroupRoot != "/sys/fs/cgroup" || s.cfg.ProcRoot != "/proc" || s.cfg.Clock == nil || s.cfg.Logger == nil {
		t.Errorf("defaults not filled: %+v", s.cfg)
	}
}

func TestPodUID(t *testing.T) {
	for name, want := range map[string]string{
		"pod1234-ab":                            "1234-ab",
		"kubepods-besteffort-pod12_34_ab.slice": "12-34-ab",
		"kubepods-pod1_2.slice":                 "1-2",
		"pod":                                   "",
		"burstable":                             "",
		"kubepods-burstable.slice":              "",
		"kubepods-pod.slice":                    "",
	} {
		got, ok := podUID(name)
		if string(got) != want || ok != (want != "") {
			t.Errorf("podUID(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// On this machine's real hierarchy (when there is one), a node summary
// reads without error and is plausible.
func TestCgroupStatsHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	s, err := NewCgroupStats(CgroupStatsConfig{NodeFsPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.detect(); err != nil {
		t.Skipf("no usable cgroup hierarchy here: %v", err)
	}
	s.statfs = statfs
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Memory.WorkingSetBytes == 0 || sum.Memory.AvailableBytes == 0 || sum.NodeFs.CapacityBytes == 0 ||
		sum.NodeFs.Inodes == 0 || sum.PID.MaxPID == 0 || sum.PID.NumProcesses == 0 {
		t.Errorf("implausible host summary: mem %+v fs %+v pid %+v", *sum.Memory, *sum.NodeFs, *sum.PID)
	}
}

func TestCgroupStatsCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, _ := NewCgroupStats(CgroupStatsConfig{})
	if _, err := s.Summary(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestFakeStats(t *testing.T) {
	var zero FakeStats
	if s, err := zero.Summary(t.Context()); err != nil || s == nil || s.Memory != nil {
		t.Errorf("zero FakeStats = %+v, %v", s, err)
	}
	in := &Summary{Memory: &MemoryStats{AvailableBytes: 5}, Pods: []PodStats{{UID: "a", Containers: []ContainerStats{{Name: "c"}}}}}
	f := NewFakeStats(in)
	in.Memory.AvailableBytes = 6 // the fake keeps its own copy
	in.Pods[0].Containers[0].Name = "x"
	got, _ := f.Summary(t.Context())
	if got.Memory.AvailableBytes != 5 || got.Pods[0].Containers[0].Name != "c" {
		t.Errorf("Summary = %+v, not a copy of what was set", got)
	}
	got.Memory.AvailableBytes = 7 // and hands out copies
	if again, _ := f.Summary(t.Context()); again.Memory.AvailableBytes != 5 {
		t.Errorf("a caller's change leaked into the fake")
	}
	boom := errors.New("boom")
	f.SetError(boom)
	if _, err := f.Summary(t.Context()); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	f.Set(&Summary{PID: &PIDStats{MaxPID: 9}})
	if s, err := f.Summary(t.Context()); err != nil || s.PID.MaxPID != 9 {
		t.Errorf("after Set: %+v, %v", s, err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				f.Set(&Summary{})
				_, _ = f.Summary(t.Context())
			}
		})
	}
	wg.Wait()
	if f.Calls() != 4+200 {
		t.Errorf("Calls = %d, want 204", f.Calls())
	}
}

// BenchmarkCgroupStatsSummary: one Summary over a v1 tree of 110 pods.
func BenchmarkCgroupStatsSummary(b *testing.B) {
	cg := b.TempDir()
	files := map[string]string{
		"memory/memory.usage_in_bytes":          "3221225472\n",
		"memory/memory.stat":                    "total_inactive_file 1073741824\n",
		"memory/kubepods/memory.usage_in_bytes": "1610612736\n",
		"memory/kubepods/memory.stat":           "total_inactive_file 536870912\n",
		"memory/kubepods/memory.limit_in_bytes": "6442450944\n",
	}
	qos := []string{"", "burstable/", "besteffort/"}
	for i := range 110 {
		dir := fmt.Sprintf("kubepods/%spod%08d-0000-0000-0000-000000000000", qos[i%3], i)
		files["memory/"+dir+"/memory.usage_in_bytes"] = "104857600\n"
		files["memory/"+dir+"/memory.stat"] = "cache 1\nrss 2\ntotal_cache 3\ntotal_rss 4\ntotal_inactive_file 1048576\ntotal_active_file 5\n"
		files["pids/"+dir+"/pids.current"] = "3\n"
	}
	for p, c := range files {
		full := filepath.Join(cg, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	proc := b.TempDir()
	for p, c := range map[string]string{"meminfo": "MemTotal: 8388608 kB\n", "sys/kernel/pid_max": "32768\n", "loadavg": "0 0 0 1/100 5\n"} {
		full := filepath.Join(proc, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, err := NewCgroupStats(CgroupStatsConfig{CgroupRoot: cg, ProcRoot: proc, PodsCgroup: "kubepods"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sum, err := s.Summary(b.Context())
		if err != nil || len(sum.Pods) != 110 {
			b.Fatalf("Summary: %d pods, %v", len(sum.Pods), err)
		}
	}
}

// TestNewCgroupStatsReportsEveryProblem: every bad field is named at once.
func TestNewCgroupStatsReportsEveryProblem(t *testing.T) {
	_, err := NewCgroupStats(CgroupStatsConfig{CgroupRoot: "rel", DiskUsagePeriod: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewCgroupStats = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"CgroupRoot", "DiskUsagePeriod"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewCgroupStats = %v: %s not named", err, name)
		}
	}
}

// With a Layout, Summary asks it until it answers and then reads the
// cgroups it named, with its allocatable memory.
func TestCgroupStatsLayout(t *testing.T) {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		"cgroup.controllers":      "cpuset cpu io memory pids\n",
		"memory.stat":             "anon 2147483648\nfile 2147483648\ninactive_file 1073741824\n",
		"kubepods/memory.current": "2147483648\n",
		"kubepods/memory.stat":    "inactive_file 1073741824\n",
		"kubepods/memory.max":     "max\n",
	})
	notYet := errors.New("not started")
	layoutErr := notYet
	s := newTestStats(t, CgroupStatsConfig{ProcRoot: procTree(t), Layout: func() (CgroupLayout, error) {
		return CgroupLayout{CgroupRoot: cg, PodsCgroup: "/kubepods/", AllocatableMemoryBytes: 2 * gi}, layoutErr
	}})
	if _, err := s.Summary(t.Context()); !errors.Is(err, notYet) || !errors.Is(err, ErrStats) {
		t.Fatalf("Summary before the layout: %v", err)
	}
	layoutErr = nil
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (MemoryStats{AvailableBytes: gi, WorkingSetBytes: gi}); sum.AllocatableMemory == nil || *sum.AllocatableMemory != want {
		t.Fatalf("AllocatableMemory = %+v, want %+v", sum.AllocatableMemory, want)
	}
}
