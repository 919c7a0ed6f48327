//go:build linux

package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeCRIStats is a ContainerStatsLister returning fixed stats or an error.
type fakeCRIStats struct {
	mu    sync.Mutex
	stats []*runtimeapi.ContainerStats
	err   error
	calls int
}

func (f *fakeCRIStats) ListContainerStats(ctx context.Context, _ *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return f.stats, ctx.Err()
}

// criStat is one container's CRI stats; an empty uid or name leaves the
// label out.
func criStat(uid, name string, attempt uint32, ws, rootfs, inodes uint64) *runtimeapi.ContainerStats {
	labels := map[string]string{}
	if uid != "" {
		labels[labelPodUID] = uid
	}
	if name != "" {
		labels[labelContainerName] = name
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:       fmt.Sprintf("%s-%s-%d", uid, name, attempt),
			Metadata: &runtimeapi.ContainerMetadata{Name: "meta-" + name, Attempt: attempt},
			Labels:   labels,
		},
		Memory:        &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}},
		WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: &runtimeapi.UInt64Value{Value: rootfs}, InodesUsed: &runtimeapi.UInt64Value{Value: inodes}},
	}
}

// v1PodsTree is a cgroup v1 tree with pods a-1 and b-2.
func v1PodsTree(t *testing.T) string {
	cg := t.TempDir()
	tree(t, cg, map[string]string{
		"memory/memory.usage_in_bytes":                           "3221225472\n",
		"memory/memory.stat":                                     "total_inactive_file 1073741824\n",
		"memory/kubepods/memory.usage_in_bytes":                  "1610612736\n",
		"memory/kubepods/memory.stat":                            "total_inactive_file 536870912\n",
		"memory/kubepods/memory.limit_in_bytes":                  "6442450944\n",
		"memory/kubepods/poda-1/memory.usage_in_bytes":           "1000\n",
		"memory/kubepods/poda-1/memory.stat":                     "total_inactive_file 300\n",
		"pids/kubepods/poda-1/pids.current":                      "4\n",
		"memory/kubepods/burstable/podb-2/memory.usage_in_bytes": "5000\n",
		"memory/kubepods/burstable/podb-2/memory.stat":           "total_inactive_file 1000\n",
		"pids/kubepods/burstable/podb-2/pids.current":            "2\n",
	})
	return cg
}

func duOf(t *testing.T, dir string) diskUsage {
	t.Helper()
	u, _, err := duDir(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func containersOf(p PodStats) string {
	var s []string
	for _, c := range p.Containers {
		s = append(s, fmt.Sprintf("%s{ws %d rootfs %d logs %d}", c.Name, c.MemoryWorkingSetBytes, c.RootfsBytes, c.LogsBytes))
	}
	return strings.Join(s, " ")
}

// TestCgroupStatsDisk: writable layers from CRI stats (the latest attempt
// of each container), log directories and disk-backed emptyDirs per pod,
// containers per pod, and a pod known only from CRI stats.
func TestCgroupStatsDisk(t *testing.T) {
	logs, podsDir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(logs, "default_a_a-1", "app", "0.log"), 8192)
	writeFile(t, filepath.Join(logs, "default_a_a-1", "app", "1.log"), 4096)
	writeFile(t, filepath.Join(logs, "default_a_a-1", "sidecar", "0.log"), 100)
	writeFile(t, filepath.Join(logs, "default_c_c-3", "web", "0.log"), 3000)
	writeFile(t, filepath.Join(logs, "default_z_z-9", "gone", "0.log"), 3000) // no such pod
	writeFile(t, filepath.Join(logs, "not-a-pod-dir", "x"), 10)
	empty := filepath.Join(podsDir, "a-1", "volumes", emptyDirDir)
	writeFile(t, filepath.Join(empty, "cache", "f"), 20000)
	writeFile(t, filepath.Join(empty, "scratch", "sub", "g"), 100)
	writeFile(t, filepath.Join(podsDir, "a-1", "volumes", "kubernetes.io~configmap", "cm", "x"), 50000)

	cri := &fakeCRIStats{stats: []*runtimeapi.ContainerStats{
		criStat("a-1", "app", 0, 1, 100, 1), // an older instance: not counted
		criStat("a-1", "app", 1, 600, 300, 3),
		criStat("a-1", "sidecar", 0, 10, 50, 1),
		criStat("b-2", "", 0, 0, 999, 2), // exited, same attempt (an older sandbox): not counted
		criStat("b-2", "", 0, 20, 70, 2), // name from the metadata
		criStat("c-3", "web", 2, 5000, 1000, 9),
		criStat("", "infra", 0, 1, 1, 1), // not a pod's container
	}}
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), PodsCgroup: "kubepods", ProcRoot: procTree(t), NodeFsPath: "/node",
		ContainerStats: cri, PodLogsRoot: logs, PodsDir: podsDir,
	})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range sum.Pods {
		uids = append(uids, string(p.UID))
	}
	// The cgroup pods in directory order, then the CRI-only one.
	if got := strings.Join(uids, ","); got != "b-2,a-1,c-3" {
		t.Fatalf("pods = %s, want b-2,a-1,c-3 (cgroup pods, then CRI-only ones)", got)
	}
	a, b, c := sum.Pods[1], sum.Pods[0], sum.Pods[2]

	appLogs := duOf(t, filepath.Join(logs, "default_a_a-1", "app")).Bytes
	sidecarLogs := duOf(t, filepath.Join(logs, "default_a_a-1", "sidecar")).Bytes
	aLogs := duOf(t, filepath.Join(logs, "default_a_a-1"))
	if a.MemoryWorkingSetBytes != 700 || a.Processes != 4 {
		t.Errorf("a-1 memory %d procs %d, want the cgroup's 700 and 4", a.MemoryWorkingSetBytes, a.Processes)
	}
	if a.RootfsBytes != 350 || a.RootfsInodes != 4 {
		t.Errorf("a-1 rootfs %d bytes %d inodes, want 350 and 4", a.RootfsBytes, a.RootfsInodes)
	}
	if a.LogsBytes != aLogs.Bytes || a.LogsInodes != 6 || a.LogsBytes < 8192+4096+100 {
		t.Errorf("a-1 logs %d bytes %d inodes, want %d and 6", a.LogsBytes, a.LogsInodes, aLogs.Bytes)
	}
	// cache, f, scratch, sub, g; not the configmap.
	if a.VolumeInodes != 5 || a.VolumeBytes < 20100 || a.VolumeBytes >= 50000 {
		t.Errorf("a-1 volumes %d bytes %d inodes, want 5 inodes, 20100..50000 bytes", a.VolumeBytes, a.VolumeInodes)
	}
	if got, want := containersOf(a), fmt.Sprintf("app{ws 600 rootfs 300 logs %d} sidecar{ws 10 rootfs 50 logs %d}", appLogs, sidecarLogs); got != want {
		t.Errorf("a-1 containers = %s, want %s", got, want)
	}
	if b.MemoryWorkingSetBytes != 4000 || b.RootfsBytes != 70 || b.LogsBytes != 0 || b.VolumeBytes != 0 {
		t.Errorf("b-2 = %+v", b)
	}
	if got := containersOf(b); got != "meta-{ws 20 rootfs 70 logs 0}" {
		t.Errorf("b-2 containers = %s", got)
	}
	webLogs := duOf(t, filepath.Join(logs, "default_c_c-3", "web")).Bytes
	if c.MemoryWorkingSetBytes != 5000 || c.Processes != 0 || c.RootfsBytes != 1000 || c.RootfsInodes != 9 || c.LogsInodes != 3 {
		t.Errorf("c-3 (CRI only) = %+v", c)
	}
	if got, want := containersOf(c), fmt.Sprintf("web{ws 5000 rootfs 1000 logs %d}", webLogs); got != want {
		t.Errorf("c-3 containers = %s, want %s", got, want)
	}
	if cri.calls != 1 {
		t.Errorf("CRI calls = %d, want 1", cri.calls)
	}
}

// TestCgroupStatsCRIOnly: without pod cgroups, the pods come from CRI
// stats, with their containers' working set.
func TestCgroupStatsCRIOnly(t *testing.T) {
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), ProcRoot: procTree(t),
		ContainerStats: &fakeCRIStats{stats: []*runtimeapi.ContainerStats{
			criStat("x", "a", 0, 100, 10, 1), criStat("x", "b", 0, 200, 20, 1), {}, // an empty entry is ignored
		}},
	})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].UID != "x" || sum.Pods[0].MemoryWorkingSetBytes != 300 || sum.Pods[0].RootfsBytes != 30 {
		t.Errorf("pods = %+v", sum.Pods)
	}
	if sum.AllocatableMemory != nil {
		t.Errorf("AllocatableMemory = %+v without a pods cgroup", sum.AllocatableMemory)
	}
}

// TestCgroupStatsCRIError: failing CRI stats are logged; memory, logs and
// volumes are still reported, so memory eviction keeps working.
func TestCgroupStatsCRIError(t *testing.T) {
	logs, podsDir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(logs, "ns_a_a-1", "app", "0.log"), 4096)
	writeFile(t, filepath.Join(podsDir, "a-1", "volumes", emptyDirDir, "v", "f"), 4096)
	core, logged := observer.New(zapcore.WarnLevel)
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), PodsCgroup: "kubepods", ProcRoot: procTree(t),
		ContainerStats: &fakeCRIStats{err: errors.New("rpc error: code = Unavailable")},
		PodLogsRoot:    logs, PodsDir: podsDir, Logger: zap.New(core),
	})
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatalf("Summary failed with CRI stats down: %v", err)
	}
	if sum.Memory == nil || sum.AllocatableMemory == nil || len(sum.Pods) != 2 {
		t.Fatalf("summary = %+v", sum)
	}
	a := podsByUID(sum.Pods)["a-1"]
	if a.MemoryWorkingSetBytes != 700 || a.LogsBytes == 0 || a.VolumeInodes != 2 || a.RootfsBytes != 0 {
		t.Errorf("a-1 = %+v", a)
	}
	if got := containersOf(a); !strings.HasPrefix(got, "app{ws 0 rootfs 0 logs ") {
		t.Errorf("a-1 containers = %s, want app from its log dir", got)
	}
	if e := logged.FilterMessageSnippet("CRI container stats failed").All(); len(e) != 1 || !strings.Contains(fmt.Sprint(e[0].ContextMap()["error"]), "Unavailable") {
		t.Errorf("logged = %+v, want one warning with the error", logged.All())
	}
}

// TestCgroupStatsDiskUnreadable: a directory that cannot be measured is
// logged and left out; the rest is reported. A walk cut short by ctx fails
// the Summary.
func TestCgroupStatsDiskUnreadable(t *testing.T) {
	logs := t.TempDir()
	writeFile(t, filepath.Join(logs, "ns_a_a-1", "app", "0.log"), 4096)
	writeFile(t, filepath.Join(logs, "ns_b_b-2", "app", "0.log"), 4096)
	core, logged := observer.New(zapcore.WarnLevel)
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), PodsCgroup: "kubepods", ProcRoot: procTree(t), PodLogsRoot: logs, Logger: zap.New(core),
	})
	unreadable := filepath.Join(logs, "ns_a_a-1")
	s.du = func(ctx context.Context, path string, child func(string, bool, diskUsage)) (diskUsage, bool, error) {
		if path == unreadable {
			return diskUsage{}, false, &os.PathError{Op: "open", Path: path, Err: os.ErrPermission}
		}
		return duDir(ctx, path, child)
	}
	sum, err := s.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pods := podsByUID(sum.Pods)
	if pods["a-1"].LogsBytes != 0 || pods["b-2"].LogsBytes == 0 {
		t.Errorf("logs a-1 %d b-2 %d", pods["a-1"].LogsBytes, pods["b-2"].LogsBytes)
	}
	if e := logged.FilterMessage("disk usage not measured").All(); len(e) != 1 || e[0].ContextMap()["uid"] != "a-1" {
		t.Errorf("logged = %+v", logged.All())
	}

	ctx, cancel := context.WithCancel(t.Context())
	s.du = func(context.Context, string, func(string, bool, diskUsage)) (diskUsage, bool, error) {
		cancel()
		return diskUsage{}, false, context.Canceled
	}
	if _, err := s.Summary(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Summary with the walk canceled: %v, want context.Canceled", err)
	}
}

// TestCgroupStatsDiskUsagePeriod: with a DiskUsagePeriod a directory is
// walked again only once its last walk is that old; directories of pods
// gone are forgotten.
func TestCgroupStatsDiskUsagePeriod(t *testing.T) {
	logs, podsDir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(logs, "ns_a_a-1", "app", "0.log"), 4096)
	writeFile(t, filepath.Join(podsDir, "a-1", "volumes", emptyDirDir, "v", "f"), 4096)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cri := &fakeCRIStats{stats: []*runtimeapi.ContainerStats{criStat("a-1", "app", 0, 1, 10, 1)}}
	s := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), ProcRoot: procTree(t), ContainerStats: cri,
		PodLogsRoot: logs, PodsDir: podsDir, DiskUsagePeriod: time.Minute, Clock: clk,
	})
	walks := 0
	s.du = func(ctx context.Context, path string, child func(string, bool, diskUsage)) (diskUsage, bool, error) {
		walks++
		return duDir(ctx, path, child)
	}
	get := func() PodStats {
		t.Helper()
		sum, err := s.Summary(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Pods) != 1 {
			t.Fatalf("pods = %+v", sum.Pods)
		}
		return sum.Pods[0]
	}
	first := get()
	if walks != 2 || first.LogsBytes == 0 || first.VolumeInodes != 2 || containersOf(first) != fmt.Sprintf("app{ws 1 rootfs 10 logs %d}", first.Containers[0].LogsBytes) {
		t.Fatalf("first: %d walks, %+v", walks, first)
	}
	writeFile(t, filepath.Join(logs, "ns_a_a-1", "app", "1.log"), 1<<20)
	writeFile(t, filepath.Join(podsDir, "a-1", "volumes", emptyDirDir, "v", "g"), 1<<20)
	cri.stats = []*runtimeapi.ContainerStats{criStat("a-1", "app", 0, 1, 20, 1)}
	clk.Step(59 * time.Second)
	second := get()
	if walks != 2 || second.LogsBytes != first.LogsBytes || second.VolumeBytes != first.VolumeBytes ||
		second.Containers[0].LogsBytes != first.Containers[0].LogsBytes || second.RootfsBytes != 20 {
		t.Errorf("within the period: %d walks, %+v, want the walks of %+v and the new rootfs", walks, second, first)
	}
	clk.Step(time.Second)
	third := get()
	if walks != 4 || third.LogsBytes < first.LogsBytes+1<<20 || third.VolumeBytes < first.VolumeBytes+1<<20 || third.VolumeInodes != 3 ||
		third.Containers[0].LogsBytes < 1<<20 {
		t.Errorf("after the period: %d walks, %+v", walks, third)
	}
	if len(s.duCache) != 2 {
		t.Errorf("cache holds %d dirs, want 2", len(s.duCache))
	}
	// The pod goes: its directories are forgotten after two periods.
	cri.stats = nil
	clk.Step(2*time.Minute + time.Second)
	if sum, err := s.Summary(t.Context()); err != nil || len(sum.Pods) != 0 {
		t.Fatalf("Summary: %+v, %v", sum, err)
	}
	if len(s.duCache) != 0 {
		t.Errorf("cache holds %d dirs of a pod gone", len(s.duCache))
	}
}

func TestNewCgroupStatsValidatesDiskPaths(t *testing.T) {
	for _, cfg := range []CgroupStatsConfig{{PodLogsRoot: "var/log/pods"}, {PodsDir: "pods"}, {DiskUsagePeriod: -time.Second}} {
		if _, err := NewCgroupStats(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func diskPod(name string, prio int32, ephemeralReq string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "app"}}},
	}
	if ephemeralReq != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(ephemeralReq)}
	}
	return p
}

// TestDiskPressureRanksByMeasuredUse: under nodefs pressure the manager,
// fed by CgroupStats over a real log and volume tree and CRI stats,
// evicts the pod using more than its ephemeral-storage request, though
// another pod uses more disk and has a lower priority; the message names
// the container.
func TestDiskPressureRanksByMeasuredUse(t *testing.T) {
	cg := t.TempDir()
	files := map[string]string{
		"memory/memory.usage_in_bytes":          "1073741824\n",
		"memory/memory.stat":                    "total_inactive_file 0\n",
		"memory/kubepods/memory.usage_in_bytes": "1000\n",
		"memory/kubepods/memory.stat":           "total_inactive_file 0\n",
		"memory/kubepods/memory.limit_in_bytes": "6442450944\n",
	}
	for _, uid := range []string{"big", "over", "small"} {
		files["memory/kubepods/burstable/pod"+uid+"/memory.usage_in_bytes"] = "100\n"
		files["memory/kubepods/burstable/pod"+uid+"/memory.stat"] = "total_inactive_file 0\n"
		files["pids/kubepods/burstable/pod"+uid+"/pids.current"] = "1\n"
	}
	tree(t, cg, files)
	logs, podsDir := t.TempDir(), t.TempDir()
	// big: 3Mi of volume and a 1Mi layer, request 10Mi. over: 1Mi of logs
	// and a 100Ki layer, request 512Ki. small: a little log, request 1Mi.
	writeFile(t, filepath.Join(podsDir, "big", "volumes", emptyDirDir, "data", "f"), 3<<20)
	writeFile(t, filepath.Join(logs, "default_big_big", "app", "0.log"), 4096)
	writeFile(t, filepath.Join(logs, "default_over_over", "app", "0.log"), 1<<20)
	writeFile(t, filepath.Join(logs, "default_small_small", "app", "0.log"), 4096)
	cri := &fakeCRIStats{stats: []*runtimeapi.ContainerStats{
		criStat("big", "app", 0, 100, 1<<20, 10),
		criStat("over", "app", 0, 100, 100<<10, 10),
		criStat("small", "app", 0, 100, 4096, 1),
	}}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	stats := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: cg, PodsCgroup: "kubepods", ProcRoot: procTree(t), NodeFsPath: "/node",
		ContainerStats: cri, PodLogsRoot: logs, PodsDir: podsDir, Clock: clk,
	})
	// nodefs has 10Gi of 100Gi available: under a 20% threshold.
	ts := mustParse(t, map[string]string{"nodefs.available": "20%"}, nil, nil, nil)
	pods := []*v1.Pod{diskPod("small", 0, "1Mi"), diskPod("big", 0, "10Mi"), diskPod("over", 100, "512Ki")}
	var killed []*v1.Pod
	var msg string
	m, err := New(Config{
		Thresholds: ts, Stats: stats, Clock: clk,
		ActivePods: func() []*v1.Pod { return pods },
		KillPod: func(_ context.Context, p *v1.Pod, st v1.PodStatus, _ int64) error {
			killed = append(killed, p)
			msg = st.Message
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if names(killed) != "over" {
		t.Fatalf("killed %q, want over (above its ephemeral-storage request)", names(killed))
	}
	if !strings.Contains(msg, "The node was low on resource: ephemeral-storage.") ||
		!strings.Contains(msg, "Container app was using ") || !strings.Contains(msg, "request is 512Ki") {
		t.Errorf("message = %q", msg)
	}

	// The ranking over what CgroupStats measured: over its request first,
	// then the one closer to its request.
	sum, err := stats.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[types.UID]*PodStats{}
	for i := range sum.Pods {
		byUID[sum.Pods[i].UID] = &sum.Pods[i]
	}
	ranked := []*v1.Pod{pods[0], pods[1], pods[2]}
	rank(ranked, SignalNodeFsAvailable, byUID, false)
	if got := names(ranked); got != "over,small,big" {
		t.Errorf("rank = %s, want over,small,big", got)
	}
}

// TestInodePressureRanksByMeasuredInodes: under nodefs.inodesFree
// pressure the pod whose emptyDir holds the most files is evicted, though
// another pod uses more bytes; with a dedicated image file system the
// writable layers' inodes do not count for nodefs.
func TestInodePressureRanksByMeasuredInodes(t *testing.T) {
	podsDir, logs := t.TempDir(), t.TempDir()
	for i := range 40 {
		writeFile(t, filepath.Join(podsDir, "many", "volumes", emptyDirDir, "v", fmt.Sprintf("f%d", i)), 1)
	}
	writeFile(t, filepath.Join(podsDir, "fat", "volumes", emptyDirDir, "v", "f"), 4<<20)
	cri := &fakeCRIStats{stats: []*runtimeapi.ContainerStats{
		criStat("many", "app", 0, 1, 4096, 1),
		criStat("fat", "app", 0, 1, 4096, 1000), // a layer of many files: on the image fs
	}}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	stats := newTestStats(t, CgroupStatsConfig{
		CgroupRoot: v1PodsTree(t), ProcRoot: procTree(t), NodeFsPath: "/node", ImageFsPath: "/image",
		ContainerStats: cri, PodLogsRoot: logs, PodsDir: podsDir, Clock: clk,
	})
	// nodefs has 500 of 1000 inodes free: under a 60% threshold.
	ts := mustParse(t, map[string]string{"nodefs.inodesFree": "60%"}, nil, nil, nil)
	pods := []*v1.Pod{diskPod("fat", 0, ""), diskPod("many", 0, "")}
	var killed []*v1.Pod
	m, err := New(Config{
		Thresholds: ts, Stats: stats, Clock: clk,
		ActivePods: func() []*v1.Pod { return pods },
		KillPod: func(_ context.Context, p *v1.Pod, _ v1.PodStatus, _ int64) error {
			killed = append(killed, p)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if names(killed) != "many" {
		t.Errorf("killed %q, want many (41 volume inodes)", names(killed))
	}
}

// BenchmarkCgroupStatsSummaryDisk: one Summary over 110 pods with CRI
// stats for 3 containers each, 2 log files per container, and 2 emptyDir
// volumes of 20 files each per pod (the disk walks cover about 8,000
// entries).
// With DiskUsagePeriod the walks are replayed from the last one (cached).
func BenchmarkCgroupStatsSummaryDisk(b *testing.B) {
	cfg := diskBenchConfig(b)
	for _, bc := range []struct {
		name   string
		period time.Duration
	}{{"walk", 0}, {"cached", time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg.DiskUsagePeriod = bc.period
			s, err := NewCgroupStats(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				sum, err := s.Summary(b.Context())
				if err != nil || len(sum.Pods) != 110 || sum.Pods[0].VolumeInodes != 2*(1+4+20) || len(sum.Pods[0].Containers) != 3 {
					b.Fatalf("Summary: %+v, %v", sum.Pods[0], err)
				}
			}
		})
	}
}

func diskBenchConfig(b *testing.B) CgroupStatsConfig {
	cg, logs, podsDir := b.TempDir(), b.TempDir(), b.TempDir()
	files := map[string]string{
		"memory/memory.usage_in_bytes":          "3221225472\n",
		"memory/memory.stat":                    "total_inactive_file 1073741824\n",
		"memory/kubepods/memory.usage_in_bytes": "1610612736\n",
		"memory/kubepods/memory.stat":           "total_inactive_file 536870912\n",
		"memory/kubepods/memory.limit_in_bytes": "6442450944\n",
	}
	var cri []*runtimeapi.ContainerStats
	qos := []string{"", "burstable/", "besteffort/"}
	for i := range 110 {
		uid := fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		dir := fmt.Sprintf("kubepods/%spod%s", qos[i%3], uid)
		files["memory/"+dir+"/memory.usage_in_bytes"] = "104857600\n"
		files["memory/"+dir+"/memory.stat"] = "total_inactive_file 1048576\n"
		files["pids/"+dir+"/pids.current"] = "3\n"
		for c := range 3 {
			name := fmt.Sprintf("c%d", c)
			cri = append(cri, criStat(uid, name, 0, 1<<20, 1<<20, 10))
			for r := range 2 {
				files[fmt.Sprintf("logs/default_pod%d_%s/%s/%d.log", i, uid, name, r)] = "log line\n"
			}
		}
		for v := range 2 {
			for f := range 20 {
				files[fmt.Sprintf("pods/%s/volumes/%s/vol%d/d%d/f%d", uid, emptyDirDir, v, f%4, f)] = "data"
			}
		}
	}
	for p, c := range files {
		root := cg
		if rest, ok := strings.CutPrefix(p, "logs/"); ok {
			root, p = logs, rest
		} else if rest, ok := strings.CutPrefix(p, "pods/"); ok {
			root, p = podsDir, rest
		}
		full := filepath.Join(root, filepath.FromSlash(p))
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
	return CgroupStatsConfig{
		CgroupRoot: cg, ProcRoot: proc, PodsCgroup: "kubepods",
		ContainerStats: &fakeCRIStats{stats: cri}, PodLogsRoot: logs, PodsDir: podsDir,
	}
}
