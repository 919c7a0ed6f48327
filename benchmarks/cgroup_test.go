package benchmarks

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kcm "k8s.io/kubernetes/pkg/kubelet/cm"

	"github.com/nodekit/nodekit/containermgr"
)

// The values of 110 pod cgroups (a full node): a third Guaranteed, a third
// Burstable (two containers, one with a cpu limit only), a third
// BestEffort. Only the computation; nothing is written.

func cgroupPods() []*v1.Pod {
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	pods := make([]*v1.Pod, 110)
	for i := range pods {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("u%d", i)), Name: fmt.Sprintf("p%d", i), Namespace: "ns"}}
		switch i % 3 {
		case 0:
			p.Spec.Containers = []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("100m", "100Mi")}}}
		case 1:
			p.Spec.Containers = []v1.Container{
				{Name: "a", Resources: v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("200m", "200Mi")}},
				{Name: "b", Resources: v1.ResourceRequirements{Requests: rl("50m", ""), Limits: rl("100m", "")}},
			}
		default:
			p.Spec.Containers = []v1.Container{{Name: "a"}}
		}
		pods[i] = p
	}
	return pods
}

func i64(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func u64(p *uint64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

const cfsPeriod = 100000

func checkCgroupSame(tb testing.TB) {
	tb.Helper()
	for _, p := range cgroupPods() {
		a := containermgr.ResourceConfigForPod(p, containermgr.PodResourceOptions{CPUPeriod: cfsPeriod})
		b := kcm.ResourceConfigForPod(p, true, cfsPeriod, false, kubeletconfig.NoneMemoryReservationPolicy)
		x := fmt.Sprintf("shares=%s quota=%s period=%s mem=%s pids=%s huge=%d", u64(a.CPUShares), i64(a.CPUQuota), u64(a.CPUPeriod), i64(a.Memory), i64(a.PidsLimit), len(a.HugePageLimit))
		y := fmt.Sprintf("shares=%s quota=%s period=%s mem=%s pids=%s huge=%d", u64(b.CPUShares), i64(b.CPUQuota), u64(b.CPUPeriod), i64(b.Memory), i64(b.PidsLimit), len(b.HugePageLimit))
		if x != y {
			tb.Fatalf("pod cgroup of %s: nodekit %s, kubelet %s", p.Name, x, y)
		}
	}
}

func TestPodCgroupSameValues(t *testing.T) { checkCgroupSame(t) }

// BenchmarkPodCgroupValues: ResourceConfigForPod for the 110 pods.
func BenchmarkPodCgroupValues(b *testing.B) {
	checkCgroupSame(b)
	pods := cgroupPods()
	b.Run("pods=110", func(b *testing.B) {
		b.Run("nodekit", func(b *testing.B) {
			opts := containermgr.PodResourceOptions{CPUPeriod: cfsPeriod}
			loop(b, func() {
				for _, p := range pods {
					_ = containermgr.ResourceConfigForPod(p, opts)
				}
			})
		})
		b.Run("kubelet", func(b *testing.B) {
			loop(b, func() {
				for _, p := range pods {
					_ = kcm.ResourceConfigForPod(p, true, cfsPeriod, false, kubeletconfig.NoneMemoryReservationPolicy)
				}
			})
		})
	})
}
