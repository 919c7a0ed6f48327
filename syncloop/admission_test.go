package syncloop

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func admissionPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := ltPod(fmt.Sprint("uid-", i), fmt.Sprint("p-", i), i)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m"), v1.ResourceMemory: resource.MustParse("1")}
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(1 + i%60000)}}
		pods[i] = p
	}
	return pods
}

// Admitting a manifest of 10,000 pods is O(n log n) overall (issue 23,
// item 7): before, every admission listed and re-sorted every known pod
// and summed every active pod's requests, so 10,000 pods took minutes.
// The checks still see every pod admitted before: the pod limit rejects
// exactly the pods beyond it.
func TestAdmissionOf10000PodsIsNotQuadratic(t *testing.T) {
	const n, capacity = 10_000, 9_990
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: *resource.NewQuantity(capacity, resource.DecimalSI)}
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), func(c *Config) {
		c.NodeAllocatable = func() v1.ResourceList { return alloc }
	})
	start := time.Now()
	l.HandlePodAdditions(admissionPods(n))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("admitting %d pods took %v", n, d)
	}
	rejected := 0
	for i := range n {
		if st, ok := l.StatusManager().GetPodStatus(types.UID(fmt.Sprint("uid-", i))); ok && st.Phase == v1.PodFailed {
			if st.Reason != ReasonOutOfPods {
				t.Fatalf("pod %d rejected for %s: %s", i, st.Reason, st.Message)
			}
			if i < capacity {
				t.Fatalf("pod %d rejected within capacity %d", i, capacity)
			}
			rejected++
		}
	}
	if rejected != n-capacity {
		t.Fatalf("%d pods rejected, want %d", rejected, n-capacity)
	}
}

// Host ports taken earlier in the same batch, or by a pod known before it,
// are refused; 0.0.0.0 conflicts with any IP.
func TestAdmissionHostPortsAcrossBatches(t *testing.T) {
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	mk := func(uid string, created int, ip string, port int32) *v1.Pod {
		p := ltPod(uid, uid, created)
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip}}
		return p
	}
	l.HandlePodAdditions([]*v1.Pod{mk("a", 0, "10.0.0.1", 8080)})
	l.HandlePodAdditions([]*v1.Pod{mk("b", 1, "10.0.0.2", 8080), mk("c", 2, "", 8080), mk("d", 3, "10.0.0.2", 8080), mk("e", 4, "", 9090), mk("f", 5, "10.0.0.3", 9090)})
	for uid, want := range map[string]bool{"b": true, "c": false, "d": false, "e": true, "f": false} {
		st, ok := l.StatusManager().GetPodStatus(types.UID(uid))
		rejected := ok && st.Phase == v1.PodFailed
		if rejected == want {
			t.Errorf("pod %s: rejected=%v, want admitted=%v (%s)", uid, rejected, want, st.Message)
		}
	}
}

func BenchmarkAdmission10000(b *testing.B) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("20000")}
	pods := admissionPods(10_000)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		l, _, _ := ltStubLoop(&testing.T{}, clocktesting.NewFakeClock(ltEpoch), func(c *Config) {
			c.NodeAllocatable = func() v1.ResourceList { return alloc }
		})
		b.StartTimer()
		l.HandlePodAdditions(pods)
	}
}
