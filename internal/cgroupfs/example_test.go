package cgroupfs_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/cgroupfs"
)

func ExampleReadMemory() {
	root, _ := os.MkdirTemp("", "cgroupfs")
	defer os.RemoveAll(root)
	// A cgroup v2 pod cgroup: working set is usage minus inactive file.
	pod := filepath.Join(root, "kubepods", "burstable", "pod1234")
	_ = os.MkdirAll(pod, 0o755)
	_ = os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory\n"), 0o644)
	_ = os.WriteFile(filepath.Join(pod, "memory.current"), []byte("300\n"), 0o644)
	_ = os.WriteFile(filepath.Join(pod, "memory.stat"), []byte("anon 180\ninactive_file 100\npgfault 9\n"), 0o644)
	_ = os.WriteFile(filepath.Join(pod, "cpu.stat"), []byte("usage_usec 1500\n"), 0o644)

	h, _ := cgroupfs.Detect(root)
	pods, _ := cgroupfs.ListPodCgroups(h.Memory, "kubepods")
	m, _ := cgroupfs.ReadMemory(h.MemoryDir(pods[0].Rel), h.V2, false)
	cpu, _ := cgroupfs.ReadCPUUsage(h.CPUDir(pods[0].Rel), h.V2)
	fmt.Println(h.V2, pods[0].UID, m.Usage, m.WorkingSet, m.RSS, m.PageFaults, cpu)
	// Output: true 1234 300 200 180 9 1500000
}
