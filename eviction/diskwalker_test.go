//go:build linux

package eviction

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCgroupStatsBackgroundDiskUsage: with BackgroundDiskUsage, Summary
// never walks a directory. A pod's emptyDir counts as nothing until the
// walker (woken by the first Summary that asks) has walked it; later
// growth shows after the walker's next period; a pod gone is forgotten
// after two periods.
func TestCgroupStatsBackgroundDiskUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		podsDir := t.TempDir()
		vol := filepath.Join(podsDir, "a-1", "volumes", emptyDirDir, "v")
		writeFile(t, filepath.Join(vol, "f"), 4096)
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		cri := &fakeCRIStats{stats: []*runtimeapi.ContainerStats{criStat("a-1", "app", 0, 1, 10, 1)}}
		s := newTestStats(t, CgroupStatsConfig{
			CgroupRoot: v1PodsTree(t), ProcRoot: procTree(t), ContainerStats: cri,
			PodsDir: podsDir, BackgroundDiskUsage: true, DiskUsagePeriod: time.Minute, Clock: clk,
		})
		var walks atomic.Int32
		s.du = func(ctx context.Context, path string, child func(string, bool, diskUsage)) (diskUsage, bool, error) {
			walks.Add(1)
			return duDir(ctx, path, child)
		}
		get := func() PodStats {
			t.Helper()
			sum, err := s.Summary(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sum.Pods {
				if p.UID == "a-1" {
					return p
				}
			}
			t.Fatalf("pod a-1 missing: %+v", sum.Pods)
			return PodStats{}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()

		if p := get(); p.VolumeBytes != 0 {
			t.Fatalf("volume measured before any walk: %+v", p)
		}
		synctest.Wait() // the walker, woken, walks the new directory
		if n := walks.Load(); n != 1 {
			t.Fatalf("%d walks after the first Summary, want the walker's one", n)
		}
		first := get()
		if first.VolumeBytes == 0 || first.VolumeInodes != 2 {
			t.Fatalf("after the walker's first walk: %+v", first)
		}
		if len(first.Volumes) != 1 || first.Volumes[0].Name != "v" || first.Volumes[0].UsedBytes != first.VolumeBytes {
			t.Fatalf("per-volume use %+v, want volume v with all of %d bytes", first.Volumes, first.VolumeBytes)
		}
		writeFile(t, filepath.Join(vol, "g"), 1<<20)
		clk.Step(59 * time.Second)
		synctest.Wait()
		if p := get(); p.VolumeBytes != first.VolumeBytes {
			t.Errorf("within the period: %+v, want the first walk %+v", p, first)
		}
		clk.Step(time.Second)
		synctest.Wait()
		if p := get(); p.VolumeBytes < first.VolumeBytes+1<<20 || p.VolumeInodes != 3 {
			t.Errorf("after the period: %+v", p)
		}
		if n := walks.Load(); n != 2 {
			t.Errorf("%d walks for a first walk and one period, want 2", n)
		}
		// The pod goes: after two periods the walker forgets its directory.
		cri.stats = nil
		s.cfg.CgroupRoot = procTree(t) // no pod cgroups any more
		clk.Step(time.Minute)
		synctest.Wait()
		clk.Step(time.Minute + time.Second)
		synctest.Wait()
		before := walks.Load()
		clk.Step(time.Minute)
		synctest.Wait()
		if walks.Load() != before {
			t.Errorf("the walker still walks the directory of a pod gone")
		}
		s.duMu.Lock()
		n := len(s.duCache) + len(s.wanted)
		s.duMu.Unlock()
		if n != 0 {
			t.Errorf("%d directories remembered after the pod went", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := s.Run(t.Context()); err == nil {
			t.Error("a second Run did not fail")
		}
	})
}
