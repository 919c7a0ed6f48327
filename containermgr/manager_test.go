package containermgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// v1Root makes a temp dir laid out like a v1 host: one directory per
// controller.
func v1Root(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		if err := os.Mkdir(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cpuset", "cpuset.cpus"), []byte("0-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func read(t testing.TB, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		t.Fatalf("reading %s: %v", filepath.Join(parts...), err)
	}
	return strings.TrimSpace(string(b))
}

func exists(parts ...string) bool {
	_, err := os.Stat(filepath.Join(parts...))
	return err == nil
}

func testPod(uid, name string, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"}, Spec: v1.PodSpec{Containers: cs}}
}

func newTestManager(t testing.TB, root string, version Version, edit func(*Config)) *Manager {
	t.Helper()
	cfg := Config{
		CgroupRoot: root, CgroupVersion: version,
		Capacity:       rl("4", "8Gi"),
		SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("500m", "1Gi"),
	}
	if edit != nil {
		edit(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func guaranteed() *v1.Pod { return testPod("g-1", "g", ctr(rl("1", "1Gi"), rl("1", "1Gi"))) }
func burstable() *v1.Pod  { return testPod("b-1", "b", ctr(rl("250m", "100Mi"), rl("500m", "200Mi"))) }
func besteffort() *v1.Pod { return testPod("e-1", "e", ctr(nil, nil)) }

func TestManagerV1Tree(t *testing.T) {
	root := v1Root(t)
	m := newTestManager(t, root, V1, nil)
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The pods cgroup carries the enforced allocatable (capacity - system - kube).
	if got := read(t, root, "cpu", "kubepods", "cpu.shares"); got != "3072" {
		t.Errorf("kubepods cpu.shares %s, want 3072 (3 cpus)", got)
	}
	if got := read(t, root, "memory", "kubepods", "memory.limit_in_bytes"); got != "6442450944" {
		t.Errorf("kubepods memory limit %s, want 6Gi", got)
	}
	for _, q := range []string{"burstable", "besteffort"} {
		if got := read(t, root, "cpu", "kubepods", q, "cpu.shares"); got != "2" {
			t.Errorf("%s cpu.shares %s, want 2", q, got)
		}
		if !exists(root, "memory", "kubepods", q) || !exists(root, "pids", "kubepods", q) {
			t.Errorf("%s missing in memory or pids", q)
		}
	}
	// A new cpuset cgroup inherits its parent's cpus.
	if got := read(t, root, "cpuset", "kubepods", "burstable", "cpuset.cpus"); got != "0-3" {
		t.Errorf("cpuset.cpus %q", got)
	}

	g, b, e := guaranteed(), burstable(), besteffort()
	for _, p := range []*v1.Pod{g, b, e} {
		if err := m.EnsurePodCgroup(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	gd := filepath.Join(root, "cpu", "kubepods", "podg-1")
	if read(t, gd, "cpu.shares") != "1024" || read(t, gd, "cpu.cfs_quota_us") != "100000" || read(t, gd, "cpu.cfs_period_us") != "100000" {
		t.Errorf("guaranteed cpu values: %s %s %s", read(t, gd, "cpu.shares"), read(t, gd, "cpu.cfs_quota_us"), read(t, gd, "cpu.cfs_period_us"))
	}
	if got := read(t, root, "memory", "kubepods", "podg-1", "memory.limit_in_bytes"); got != "1073741824" {
		t.Errorf("guaranteed memory %s", got)
	}
	bd := filepath.Join(root, "cpu", "kubepods", "burstable", "podb-1")
	if read(t, bd, "cpu.shares") != "256" || read(t, bd, "cpu.cfs_quota_us") != "50000" {
		t.Errorf("burstable values: %s %s", read(t, bd, "cpu.shares"), read(t, bd, "cpu.cfs_quota_us"))
	}
	if got := read(t, root, "memory", "kubepods", "burstable", "podb-1", "memory.limit_in_bytes"); got != "209715200" {
		t.Errorf("burstable memory %s", got)
	}
	ed := filepath.Join(root, "cpu", "kubepods", "besteffort", "pode-1")
	if read(t, ed, "cpu.shares") != "2" || exists(ed, "cpu.cfs_quota_us") || exists(root, "memory", "kubepods", "besteffort", "pode-1", "memory.limit_in_bytes") {
		t.Errorf("besteffort has more than shares")
	}
	// Burstable shares follow the Burstable pods' requests: updated before
	// a new pod cgroup (with the new pod counted).
	if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "256" {
		t.Errorf("burstable QoS shares %s, want 256", got)
	}
	if got := m.PodCgroupParent(b); got != "/kubepods/burstable/podb-1" {
		t.Errorf("PodCgroupParent %q", got)
	}
	if got := m.PodCgroupParent(g); got != "/kubepods/podg-1" {
		t.Errorf("PodCgroupParent %q", got)
	}

	// Destroy: gone from every controller, burstable back to 2 shares.
	if err := m.DestroyPodCgroup(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		if exists(root, c, "kubepods", "burstable", "podb-1") {
			t.Errorf("pod cgroup left in %s", c)
		}
	}
	if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable QoS shares %s after removal, want 2", got)
	}
	// Destroying again is fine.
	if err := m.DestroyPodCgroup(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func TestManagerV2Tree(t *testing.T) {
	root := t.TempDir()
	m := newTestManager(t, root, V2, func(c *Config) { c.PodPidsLimit = 100 })
	ctx := t.Context()
	g, b, e := guaranteed(), burstable(), besteffort()
	for _, p := range []*v1.Pod{g, b, e} {
		if err := m.EnsurePodCgroup(ctx, p); err != nil { // starts the manager
			t.Fatal(err)
		}
	}
	if got := read(t, root, "kubepods", "cpu.weight"); got != "118" {
		t.Errorf("kubepods cpu.weight %s, want 118 (3072 shares)", got)
	}
	if got := read(t, root, "kubepods", "memory.max"); got != "6442450944" {
		t.Errorf("kubepods memory.max %s", got)
	}
	if got := read(t, root, "cgroup.subtree_control"); !strings.Contains(got, "cpu") || !strings.Contains(got, "memory") {
		t.Errorf("controllers not enabled at the root: %q", got)
	}
	gd := filepath.Join(root, "kubepods", "podg-1")
	if read(t, gd, "cpu.weight") != "39" || read(t, gd, "cpu.max") != "100000 100000" || read(t, gd, "memory.max") != "1073741824" || read(t, gd, "pids.max") != "100" {
		t.Errorf("guaranteed v2 values: %s / %s / %s / %s", read(t, gd, "cpu.weight"), read(t, gd, "cpu.max"), read(t, gd, "memory.max"), read(t, gd, "pids.max"))
	}
	bd := filepath.Join(root, "kubepods", "burstable", "podb-1")
	if read(t, bd, "cpu.weight") != "10" || read(t, bd, "cpu.max") != "50000 100000" || read(t, bd, "memory.max") != "209715200" {
		t.Errorf("burstable v2 values: %s / %s / %s", read(t, bd, "cpu.weight"), read(t, bd, "cpu.max"), read(t, bd, "memory.max"))
	}
	if got := read(t, root, "kubepods", "besteffort", "cpu.weight"); got != "1" {
		t.Errorf("besteffort weight %s", got)
	}
	if got := read(t, root, "kubepods", "burstable", "cpu.weight"); got != "10" {
		t.Errorf("burstable QoS weight %s, want 10 (256 shares)", got)
	}
	if err := m.DestroyPodCgroup(ctx, g); err != nil {
		t.Fatal(err)
	}
	if exists(gd) {
		t.Error("guaranteed pod cgroup left")
	}
}

func TestManagerSystemdNames(t *testing.T) {
	root := v1Root(t)
	m := newTestManager(t, root, V1, func(c *Config) { c.CgroupDriver = DriverSystemd })
	p := testPod("1-2", "p", ctr(rl("100m", ""), nil))
	if err := m.EnsurePodCgroup(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	want := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"
	if got := m.PodCgroupParent(p); got != want {
		t.Fatalf("parent %q, want %q", got, want)
	}
	if got := read(t, root, "cpu", want, "cpu.shares"); got != "102" {
		t.Fatalf("shares %s", got)
	}
	// Orphan listing parses the slice names back.
	n, err := m.CleanupOrphans(t.Context(), nil, true)
	if err != nil || n != 1 || exists(root, "cpu", want) {
		t.Fatalf("cleanup: %d %v", n, err)
	}
}

func TestManagerBadPodNames(t *testing.T) {
	m := newTestManager(t, v1Root(t), V1, nil)
	for _, uid := range []string{"", "a/b", "a_b", "../x"} {
		p := testPod(uid, "bad", ctr(nil, nil))
		if err := m.EnsurePodCgroup(t.Context(), p); err == nil {
			t.Errorf("uid %q accepted", uid)
		}
		if m.PodCgroupParent(p) != "" {
			t.Errorf("uid %q got a parent", uid)
		}
	}
	if err := m.EnsurePodCgroup(t.Context(), nil); err != nil {
		t.Errorf("nil pod: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	bad := []Config{
		{CgroupRoot: "relative"},
		{CgroupVersion: "v3"},
		{CgroupDriver: "dbus"},
		{PodsCgroup: "a/b"},
		{PodsCgroup: "a_b"},
		{EnforceNodeAllocatable: []string{"system-reserved"}},
		{HardEvictionThresholds: []EvictionThreshold{{Signal: SignalMemoryAvailable, Percentage: 1.5}}},
		{SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("-1")}},
		{CPUCFSQuotaPeriod: time.Hour},
		{PodPidsLimit: -2},
	}
	for i, c := range bad {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: err = %v", i, err)
		}
	}
	_, err := New(Config{CgroupDriver: "dbus", PodsCgroup: "a_b"})
	if err == nil || !strings.Contains(err.Error(), "CgroupDriver") || !strings.Contains(err.Error(), "PodsCgroup") {
		t.Errorf("errors not joined with field names: %v", err)
	}
	// An ordinary directory with no version is not a cgroup root.
	m, err := New(Config{CgroupRoot: t.TempDir(), Capacity: rl("1", "1Gi")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); !errors.Is(err, ErrUnsupportedCgroupMode) {
		t.Fatalf("Start on a plain dir: %v", err)
	}
}

func TestCgroupsPerQOSDisabled(t *testing.T) {
	root := v1Root(t)
	m := newTestManager(t, root, V1, func(c *Config) { c.DisableCgroupsPerQOS = true })
	if err := m.EnsurePodCgroup(t.Context(), burstable()); err != nil {
		t.Fatal(err)
	}
	if m.PodCgroupParent(burstable()) != "" || exists(root, "cpu", "kubepods") {
		t.Fatal("cgroups made with cgroups per QoS off")
	}
}

func TestNodeAllocatableFromManager(t *testing.T) {
	hundredMi := resource.MustParse("100Mi")
	m := newTestManager(t, v1Root(t), V1, func(c *Config) {
		c.HardEvictionThresholds = []EvictionThreshold{{Signal: SignalMemoryAvailable, Quantity: &hundredMi}}
	})
	a := m.NodeAllocatable()
	if q := a[v1.ResourceMemory]; q.Value() != 6<<30-100<<20 {
		t.Fatalf("allocatable memory %s", q.String())
	}
	if q := m.EnforcedAllocatable()[v1.ResourceMemory]; q.Value() != 6<<30 {
		t.Fatalf("enforced memory %s", q.String())
	}
	if q := m.Capacity()[v1.ResourceCPU]; q.Value() != 4 {
		t.Fatalf("capacity %s", q.String())
	}
}

// writeProcs puts pids into an emulated cgroup.procs.
func writeProcs(t *testing.T, dir string, pids string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pids), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCleanupOrphans(t *testing.T) {
	root := v1Root(t)
	var mu sync.Mutex
	var killed []int
	// Killing pid 42 empties its cgroup; pid 7 survives.
	m := newTestManager(t, root, V1, func(c *Config) {
		c.KillProcess = func(pid int) error {
			mu.Lock()
			defer mu.Unlock()
			killed = append(killed, pid)
			if pid == 42 {
				writeProcs(t, filepath.Join(root, "cpu", "kubepods", "burstable", "podb-1"), "")
			}
			return nil
		}
	})
	ctx := t.Context()
	g, b, e := guaranteed(), burstable(), besteffort()
	for _, p := range []*v1.Pod{g, b, e} {
		if err := m.EnsurePodCgroup(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	writeProcs(t, filepath.Join(root, "cpu", "kubepods", "burstable", "podb-1"), "42\n")
	writeProcs(t, filepath.Join(root, "memory", "kubepods", "besteffort", "pode-1"), "7\n")

	// Not before every source is ready.
	if n, err := m.CleanupOrphans(ctx, []*v1.Pod{g}, false); n != 0 || err != nil {
		t.Fatalf("removed %d (%v) before sources were ready", n, err)
	}
	n, err := m.CleanupOrphans(ctx, []*v1.Pod{g}, true)
	if n != 1 || !errors.Is(err, ErrCgroupBusy) {
		t.Fatalf("removed %d, err %v; want 1 and the busy besteffort pod", n, err)
	}
	if !exists(root, "cpu", "kubepods", "podg-1") {
		t.Error("the active pod's cgroup was removed")
	}
	if exists(root, "cpu", "kubepods", "burstable", "podb-1") {
		t.Error("the emptied orphan stayed")
	}
	if !exists(root, "memory", "kubepods", "besteffort", "pode-1") {
		t.Error("the orphan with a live process was removed")
	}
	mu.Lock()
	if len(killed) != 2 {
		t.Errorf("killed %v, want 42 and 7", killed)
	}
	mu.Unlock()
	// The QoS cgroups themselves are never orphans.
	if !exists(root, "cpu", "kubepods", "burstable") || !exists(root, "cpu", "kubepods", "besteffort") {
		t.Error("a QoS cgroup was removed")
	}
	// The removed Burstable pod no longer counts towards the burstable shares.
	if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable cpu.shares %s after its only pod's cgroup was removed, want 2", got)
	}
}

func TestDestroyPodCgroupUpdatesSharesWhileActivePodsStillListsIt(t *testing.T) {
	root := v1Root(t)
	b := burstable()
	// The agent's active pods still list a pod that is being torn down.
	m := newTestManager(t, root, V1, func(c *Config) { c.ActivePods = func() []*v1.Pod { return []*v1.Pod{b} } })
	ctx := t.Context()
	if err := m.EnsurePodCgroup(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got == "2" {
		t.Fatalf("burstable cpu.shares %s with a Burstable pod, want its request", got)
	}
	if err := m.DestroyPodCgroup(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable cpu.shares %s after the pod cgroup was destroyed, want 2", got)
	}
}

func TestUpdateQOSCgroups(t *testing.T) {
	root := v1Root(t)
	m := newTestManager(t, root, V1, nil)
	ctx := t.Context()
	pods := []*v1.Pod{
		guaranteed(),
		testPod("b1", "b1", ctr(rl("250m", ""), nil)),
		testPod("b2", "b2", ctr(rl("1", ""), nil), ctr(rl("750m", ""), rl("1", ""))),
		besteffort(),
	}
	cases := []struct {
		pods []*v1.Pod
		want string
	}{
		{pods[:1], "2"},     // Guaranteed only
		{pods[3:], "2"},     // BestEffort only
		{pods[:2], "256"},   // one Burstable pod of 250m
		{pods, "2048"},      // 250m + 1750m
		{pods[2:3], "1792"}, // 1750m
		{nil, "2"},
	}
	for _, c := range cases {
		if err := m.UpdateQOSCgroups(ctx, c.pods); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != c.want {
			t.Errorf("%d pods: burstable shares %s, want %s", len(c.pods), got, c.want)
		}
		if got := read(t, root, "cpu", "kubepods", "besteffort", "cpu.shares"); got != "2" {
			t.Errorf("besteffort shares %s", got)
		}
	}
}

// Run starts the manager, updates the QoS cgroups every period and retries
// the allocatable limit; it returns when its context ends.
func TestRunPeriodicUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := v1Root(t)
		var mu sync.Mutex
		var active []*v1.Pod
		reg := prometheus.NewPedanticRegistry()
		m := newTestManager(t, root, V1, func(c *Config) {
			c.Registerer = reg
			c.ActivePods = func() []*v1.Pod { mu.Lock(); defer mu.Unlock(); return active }
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "2" {
			t.Fatalf("shares at start %s", got)
		}
		mu.Lock()
		active = []*v1.Pod{burstable()}
		mu.Unlock()
		<-time.After(DefaultQOSUpdatePeriod - time.Second)
		synctest.Wait()
		if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "2" {
			t.Fatalf("updated before the period: %s", got)
		}
		<-time.After(2 * time.Second)
		synctest.Wait()
		if got := read(t, root, "cpu", "kubepods", "burstable", "cpu.shares"); got != "256" {
			t.Fatalf("shares after a period %s, want 256", got)
		}
		if v := testutil.ToFloat64(m.ops.WithLabelValues("update_qos", "success")); v < 2 {
			t.Fatalf("update_qos metric %v", v)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// A root where the pods cgroup's memory limit can't be written: Start
// still succeeds and Run retries until it works.
func TestAllocatableRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := v1Root(t)
		block := filepath.Join(root, "memory", "kubepods", "memory.limit_in_bytes")
		if err := os.MkdirAll(block, 0o755); err != nil { // a directory: the write fails
			t.Fatal(err)
		}
		m := newTestManager(t, root, V1, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if !exists(root, "cpu", "kubepods", "burstable") {
			t.Fatal("tree not made")
		}
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
		<-time.After(DefaultQOSUpdatePeriod + time.Second)
		synctest.Wait()
		if got := read(t, block); got != "6442450944" {
			t.Fatalf("limit after retry %s", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestNewCgroupManagerReportsEveryProblem: every bad field is named at once.
func TestNewCgroupManagerReportsEveryProblem(t *testing.T) {
	_, err := NewCgroupManager(CgroupManagerConfig{Root: "rel", Version: "v9", Driver: "x"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewCgroupManager = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Root", "Version", "Driver"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewCgroupManager = %v: %s not named", err, name)
		}
	}
}

func TestSetCgroupDriverBeforeStart(t *testing.T) {
	root := v1Root(t)
	m := newTestManager(t, root, V1, nil)
	if got := m.CgroupDriver(); got != DriverCgroupfs {
		t.Fatalf("default driver %q, want cgroupfs", got)
	}
	if err := m.SetCgroupDriver("nope"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetCgroupDriver(nope) = %v, want ErrInvalidConfig", err)
	}
	if err := m.SetCgroupDriver(DriverSystemd); err != nil {
		t.Fatal(err)
	}
	if got := m.PodCgroupParent(burstable()); got != "kubepods-burstable-podb_1.slice" && !strings.HasSuffix(got, "kubepods-burstable-podb_1.slice") {
		t.Fatalf("PodCgroupParent with systemd = %q", got)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !exists(root, "cpu", "kubepods.slice") {
		t.Fatalf("systemd driver not used at Start: no cpu/kubepods.slice")
	}
	if err := m.SetCgroupDriver(DriverSystemd); err != nil {
		t.Fatalf("same driver after Start: %v", err)
	}
	if err := m.SetCgroupDriver(DriverCgroupfs); !errors.Is(err, ErrStarted) {
		t.Fatalf("changing the driver after Start = %v, want ErrStarted", err)
	}
}
