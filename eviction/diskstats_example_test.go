//go:build linux

package eviction_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/eviction"
)

// criStats stands for a CRI client (runtime/remote's Client has
// ListContainerStats).
type criStats []*runtimeapi.ContainerStats

func (c criStats) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return c, nil
}

// CgroupStats with CRI stats, the pod log root and the pods directory
// reports each pod's writable layers, logs and emptyDir volumes, and its
// containers. (The cgroup and proc trees here are stand-ins for
// /sys/fs/cgroup and /proc.)
func ExampleCgroupStats_disk() {
	root, err := os.MkdirTemp("", "diskstats-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	for path, content := range map[string]string{
		"cgroup/cgroup.controllers":                          "memory pids\n",
		"cgroup/memory.stat":                                 "anon 1000\nfile 0\ninactive_file 0\n",
		"proc/meminfo":                                       "MemTotal: 1048576 kB\n",
		"proc/sys/kernel/pid_max":                            "32768\n",
		"proc/loadavg":                                       "0 0 0 1/10 5\n",
		"logs/default_web_uid-1/app/0.log":                   "hello\n",
		"pods/uid-1/volumes/kubernetes.io~empty-dir/cache/f": "data",
	} {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			fmt.Println(err)
			return
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}
	cri := criStats{{
		Attributes: &runtimeapi.ContainerAttributes{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Labels:   map[string]string{"io.kubernetes.pod.uid": "uid-1", "io.kubernetes.container.name": "app"},
		},
		Memory:        &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: 64 << 20}},
		WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: &runtimeapi.UInt64Value{Value: 5 << 20}, InodesUsed: &runtimeapi.UInt64Value{Value: 12}},
	}}
	stats, err := eviction.NewCgroupStats(eviction.CgroupStatsConfig{
		CgroupRoot:     filepath.Join(root, "cgroup"),
		ProcRoot:       filepath.Join(root, "proc"),
		ContainerStats: cri,
		PodLogsRoot:    filepath.Join(root, "logs"),
		PodsDir:        filepath.Join(root, "pods"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := stats.Summary(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range sum.Pods {
		fmt.Printf("pod %s: working set %dMi, rootfs %dMi in %d inodes, logs in %d inodes, volumes in %d inodes\n",
			p.UID, p.MemoryWorkingSetBytes>>20, p.RootfsBytes>>20, p.RootfsInodes, p.LogsInodes, p.VolumeInodes)
		for _, c := range p.Containers {
			fmt.Printf("  container %s: rootfs %dMi, logs measured: %v\n", c.Name, c.RootfsBytes>>20, c.LogsBytes > 0)
		}
	}
	// Output:
	// pod uid-1: working set 64Mi, rootfs 5Mi in 12 inodes, logs in 3 inodes, volumes in 2 inodes
	//   container app: rootfs 5Mi, logs measured: true
}
