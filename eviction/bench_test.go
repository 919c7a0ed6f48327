package eviction

import (
	"fmt"
	"testing"

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
