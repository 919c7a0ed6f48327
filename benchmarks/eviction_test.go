package benchmarks

import (
	"fmt"
	"slices"
	"testing"
	_ "unsafe" // go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	_ "k8s.io/kubernetes/pkg/kubelet/eviction"

	"github.com/nodekit/nodekit/eviction"
)

// Neither side exports its ranking: the kubelet's is reached only through
// a running manager's loop, nodekit's through Manager.SyncOnce. To compare
// the ranking itself, the benchmark links to the two unexported functions
// by name: the kubelet's rankMemoryPressure (with the stats lookup its
// cycle builds, cachedStatsFunc) and nodekit's rank. This ties the
// benchmark to those names at v1.36.3 and at this nodekit commit; a
// rename fails the link, not silently.

//go:linkname kubeletRankMemoryPressure k8s.io/kubernetes/pkg/kubelet/eviction.rankMemoryPressure
func kubeletRankMemoryPressure(pods []*v1.Pod, stats func(*v1.Pod) (statsapi.PodStats, bool))

//go:linkname kubeletCachedStatsFunc k8s.io/kubernetes/pkg/kubelet/eviction.cachedStatsFunc
func kubeletCachedStatsFunc(podStats []statsapi.PodStats) func(*v1.Pod) (statsapi.PodStats, bool)

//go:linkname nodekitRank github.com/nodekit/nodekit/eviction.rank
func nodekitRank(pods []*v1.Pod, signal eviction.Signal, stats map[types.UID]*eviction.PodStats, dedicatedImageFs bool)

const mi = 1 << 20

// evictionInput: n pods with priorities 0..4, every third with a memory
// request of 100Mi+512B (so no excess over request equals another pod's),
// and a distinct working set per pod, so the order is total and an
// unstable sort (the kubelet's) gives the same order as a stable one.
func evictionInput(n int) ([]*v1.Pod, []statsapi.PodStats, map[types.UID]*eviction.PodStats) {
	pods := make([]*v1.Pod, n)
	ku := make([]statsapi.PodStats, n)
	nk := make(map[types.UID]*eviction.PodStats, n)
	for i := range pods {
		uid := types.UID(fmt.Sprintf("p%d", i))
		prio := int32(i % 5)
		c := v1.Container{Name: "app", Image: "app:1"}
		if i%3 == 0 {
			q := resource.NewQuantity(100*mi+512, resource.BinarySI)
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: *q}
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: *q}
		}
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{UID: uid, Name: string(uid), Namespace: "ns"},
			Spec:       v1.PodSpec{Containers: []v1.Container{c}, Priority: &prio},
			Status:     v1.PodStatus{Phase: v1.PodRunning},
		}
		ws := uint64((i*7919)%n+1) * mi
		ku[i] = statsapi.PodStats{
			PodRef: statsapi.PodReference{Name: string(uid), Namespace: "ns", UID: string(uid)},
			Memory: &statsapi.MemoryStats{WorkingSetBytes: &ws},
		}
		nk[uid] = &eviction.PodStats{UID: uid, MemoryWorkingSetBytes: ws}
	}
	return pods, ku, nk
}

func checkEvictionSame(tb testing.TB, n int) {
	tb.Helper()
	pods, ku, nk := evictionInput(n)
	a, b := slices.Clone(pods), slices.Clone(pods)
	nodekitRank(a, eviction.SignalMemoryAvailable, nk, false)
	kubeletRankMemoryPressure(b, kubeletCachedStatsFunc(ku))
	for i := range a {
		if a[i] != b[i] {
			tb.Fatalf("eviction n=%d: rank %d: nodekit %s, kubelet %s", n, i, a[i].Name, b[i].Name)
		}
	}
}

func TestEvictionSameRanking(t *testing.T) {
	for _, n := range []int{110, 1000} {
		checkEvictionSame(t, n)
	}
}

// BenchmarkEvictionRankMemory: one cycle's ranking of n active pods under
// memory pressure (the stats lookup is built before timing on both sides).
func BenchmarkEvictionRankMemory(b *testing.B) {
	for _, n := range []int{110, 1000} {
		checkEvictionSame(b, n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods, ku, nk := evictionInput(n)
			work := make([]*v1.Pod, n)
			b.Run("nodekit", func(b *testing.B) {
				loop(b, func() {
					copy(work, pods)
					nodekitRank(work, eviction.SignalMemoryAvailable, nk, false)
				})
			})
			b.Run("kubelet", func(b *testing.B) {
				stats := kubeletCachedStatsFunc(ku)
				loop(b, func() {
					copy(work, pods)
					kubeletRankMemoryPressure(work, stats)
				})
			})
		})
	}
}
