package volumemgr

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// countingPlugin wraps a plugin and counts the calls that may write to
// the file system.
type countingPlugin struct {
	Plugin
	setUps, tearDowns atomic.Int64
}

func (c *countingPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	c.setUps.Add(1)
	return c.Plugin.SetUp(ctx, pod, vol, dir)
}

func (c *countingPlugin) TearDown(ctx context.Context, dir string) error {
	c.tearDowns.Add(1)
	return c.Plugin.TearDown(ctx, dir)
}

// BenchmarkReconcileNoChange is a reconciler pass over 110 pods x 5
// volumes (the kubelet's default max pods) where everything is mounted and
// desired: no SetUp and no TearDown may happen.
func BenchmarkReconcileNoChange(b *testing.B) {
	var podList []*v1.Pod
	for i := range 110 {
		podList = append(podList, testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%03d", i)),
			"data", "cache", "cm1", "cm2", "host1"))
	}
	e := newEnv(b, podList...)
	counters := []*countingPlugin{{Plugin: e.empty}, {Plugin: e.cm}, {Plugin: e.host}}
	e.m.plugins = []Plugin{counters[0], counters[1], counters[2]}
	e.sync()
	mounted := 0
	for _, p := range podList {
		mounted += len(e.m.GetMountedVolumesForPod(p.UID))
	}
	if mounted != 550 {
		b.Fatalf("%d volumes mounted, want 550", mounted)
	}
	for _, c := range counters {
		c.setUps.Store(0)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.m.ReconcileOnce(ctx)
	}
	b.StopTimer()
	for _, c := range counters {
		if n, t := c.setUps.Load(), c.tearDowns.Load(); n != 0 || t != 0 {
			b.Fatalf("%s: %d SetUp and %d TearDown calls in passes where nothing changed", c.Name(), n, t)
		}
	}
}

// BenchmarkPopulateNoChange is a populator pass over the same pods, all
// processed already.
func BenchmarkPopulateNoChange(b *testing.B) {
	var podList []*v1.Pod
	for i := range 110 {
		podList = append(podList, testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%03d", i)),
			"data", "cache", "cm1", "cm2", "host1"))
	}
	e := newEnv(b, podList...)
	e.sync()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e.m.PopulateOnce(ctx)
	}
}

// The first mount of a pod's volume makes the pod's directory and its
// volumes directory with mode 0750 when the pod worker has not made them
// (it makes no volumes directory).
func TestFirstMountMakesPodVolumesDir(t *testing.T) {
	pod := testPod("p", "uid1", "data")
	podsDir := filepath.Join(t.TempDir(), "pods")
	pods := newFakePods(pod)
	// The real emptyDir plugin: it makes its own directory 0777.
	m, err := New(Config{PodsDir: podsDir, Plugins: DefaultPlugins(PluginsConfig{}), Pods: pods, PodState: pods, SourcesReady: pods.sourcesReady})
	if err != nil {
		t.Fatal(err)
	}
	m.PopulateOnce(t.Context())
	m.ReconcileOnce(t.Context())
	if _, err := os.Stat(filepath.Join(podsDir, "uid1", "volumes", "kubernetes.io~empty-dir", "data")); err != nil {
		t.Fatalf("the volume was not set up: %v", err)
	}
	for _, dir := range []string{filepath.Join(podsDir, "uid1"), filepath.Join(podsDir, "uid1", "volumes")} {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Fatalf("%s: %v, %v; want a 0750 directory", dir, fi, err)
		}
	}
}
