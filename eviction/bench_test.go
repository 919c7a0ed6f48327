package eviction

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkRankMemory: one cycle's ranking of the active pods.
func BenchmarkRankMemory(b *testing.B) {
	for _, n := range []int{110, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]*v1.Pod, n)
			stats := make(map[types.UID]*PodStats, n)
			for i := range pods {
				name := fmt.Sprintf("p%d", i)
				req := ""
				if i%3 == 0 {
					req = "100Mi"
				}
				pods[i] = mkPod(name, int32(i%5), req, "")
				stats[types.UID(name)] = &PodStats{MemoryWorkingSetBytes: mi(uint64(i*7919) % 512)}
			}
			work := make([]*v1.Pod, n)
			b.ReportAllocs()
			for b.Loop() {
				copy(work, pods)
				rank(work, SignalMemoryAvailable, stats, false)
			}
		})
	}
}

func benchPods(n int) ([]*v1.Pod, *Summary) {
	pods := make([]*v1.Pod, n)
	s := &Summary{Memory: &MemoryStats{AvailableBytes: mi(50), WorkingSetBytes: mi(8000)}}
	for i := range pods {
		name := fmt.Sprintf("p%d", i)
		req := ""
		if i%3 == 0 {
			req = "100Mi"
		}
		pods[i] = mkPod(name, int32(i%5), req, "")
		s.Pods = append(s.Pods, PodStats{UID: types.UID(name), MemoryWorkingSetBytes: mi(uint64(i*7919) % 512),
			Containers: []ContainerStats{{Name: "c", MemoryWorkingSetBytes: mi(uint64(i*7919) % 512)}}})
	}
	return pods, s
}

// BenchmarkSyncOnce: a whole cycle under a hard memory threshold (observe,
// rank, build the Evicted status, kill) over 110 and 1,000 pods.
func BenchmarkSyncOnce(b *testing.B) {
	for _, n := range []int{110, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods, s := benchPods(n)
			m, err := New(Config{
				Thresholds: DefaultThresholds(), Stats: NewFakeStats(s),
				ActivePods: func() []*v1.Pod { return pods },
				KillPod:    func(context.Context, *v1.Pod, v1.PodStatus, int64) error { return nil },
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if got, err := m.SyncOnce(b.Context()); err != nil || len(got) != 1 {
					b.Fatalf("SyncOnce = %v, %v", got, err)
				}
			}
		})
	}
}

// BenchmarkTriggerToVictim: from Trigger (what a memcg notifier calls on a
// crossing) to KillPod being called for the chosen pod, through Run, with
// 110 pods; reports the p99 latency.
func BenchmarkTriggerToVictim(b *testing.B) {
	defer goleak.VerifyNone(b, goleak.IgnoreCurrent())
	pods, s := benchPods(110)
	killed := make(chan struct{}, 1)
	m, err := New(Config{
		Thresholds: DefaultThresholds(), Stats: NewFakeStats(s),
		ActivePods: func() []*v1.Pod { return pods },
		KillPod: func(context.Context, *v1.Pod, v1.PodStatus, int64) error {
			killed <- struct{}{}
			return nil
		},
		Interval: time.Hour, // only triggers cycle
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-killed // Run's first cycle
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		m.Trigger()
		<-killed
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	cancel()
	<-done
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}
