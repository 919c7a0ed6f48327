package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, root string, files map[string]string) {
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

func TestDetectV1FindsCPUAccounting(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"memory/memory.usage_in_bytes": "10", "memory/memory.stat": "total_inactive_file 4\ntotal_rss 5\n",
		"cpu,cpuacct/cpuacct.usage": "77",
	})
	h, err := Detect(root)
	if err != nil || h.V2 || h.CPU != filepath.Join(root, "cpu,cpuacct") {
		t.Fatalf("Detect = %+v, %v", h, err)
	}
	m, err := ReadMemory(h.MemoryDir(""), false, true)
	if err != nil || m.Usage != 10 || m.WorkingSet != 6 || m.RSS != 5 {
		t.Errorf("ReadMemory = %+v, %v", m, err)
	}
	if n, err := ReadCPUUsage(h.CPUDir(""), false); err != nil || n != 77 {
		t.Errorf("ReadCPUUsage = %d, %v", n, err)
	}
	if _, err := Detect(t.TempDir()); err == nil {
		t.Error("Detect of an empty root succeeded")
	}
}

func TestReadMemoryV2Root(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"memory.stat": "anon 70\nfile 30\ninactive_file 20\n"})
	m, err := ReadMemory(root, true, true)
	if err != nil || m.Usage != 100 || m.WorkingSet != 80 {
		t.Errorf("ReadMemory(v2 root) = %+v, %v", m, err)
	}
	write(t, root, map[string]string{"memory.stat": "inactive_file 20\n"})
	if _, err := ReadMemory(root, true, true); err == nil {
		t.Error("a v2 root without anon/file read without error")
	}
}

func TestSelfCgroups(t *testing.T) {
	proc := t.TempDir()
	write(t, proc, map[string]string{"self/cgroup": "12:cpu,cpuacct:/\n5:memory:/process_api/x\n0::/user.slice/a\n"})
	m, err := SelfCgroups(proc, "self")
	if err != nil || m["cpuacct"] != "" || m["cpu"] != "" || m["memory"] != "process_api/x" || m[""] != "user.slice/a" {
		t.Errorf("SelfCgroups = %v, %v", m, err)
	}
}

func TestPodUID(t *testing.T) {
	for name, want := range map[string]string{
		"pod1234": "1234", "kubepods-burstable-pod12_34.slice": "12-34", "burstable": "", "pod": "", "pod12.slice": "",
	} {
		got, ok := PodUID(name)
		if got != want || ok != (want != "") {
			t.Errorf("PodUID(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestReadCPUUsageV2(t *testing.T) {
	d := t.TempDir()
	write(t, d, map[string]string{"cpu.stat": "user_usec 1\n"})
	if _, err := ReadCPUUsage(d, true); err == nil {
		t.Error("cpu.stat without usage_usec read without error")
	}
}
