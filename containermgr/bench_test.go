package containermgr

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Computing and writing the cgroup values of 110 pods (a full node) on an
// emulated v1 root.
func BenchmarkPodCgroups110(b *testing.B) {
	root := v1Root(b)
	m := newTestManager(b, root, V1, nil)
	if err := m.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	pods := make([]*v1.Pod, 110)
	names := make([]CgroupName, len(pods))
	for i := range pods {
		switch i % 3 {
		case 0:
			pods[i] = testPod(fmt.Sprintf("g-%d", i), "g", ctr(rl("100m", "100Mi"), rl("100m", "100Mi")))
		case 1:
			pods[i] = testPod(fmt.Sprintf("b-%d", i), "b", ctr(rl("100m", "100Mi"), rl("200m", "200Mi")))
		default:
			pods[i] = testPod(fmt.Sprintf("e-%d", i), "e", ctr(nil, nil))
		}
		n, err := m.PodCgroupName(pods[i])
		if err != nil {
			b.Fatal(err)
		}
		names[i] = n
		if err := m.cgm.Create(n, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, p := range pods {
			if err := m.cgm.Update(names[i], ResourceConfigForPod(p, m.podOpts)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Only the computation, for the same 110 pods.
func BenchmarkResourceConfigForPod110(b *testing.B) {
	pods := make([]*v1.Pod, 110)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("b-%d", i), "b", ctr(rl("100m", "100Mi"), rl("200m", "200Mi")), ctr(rl("50m", ""), rl("100m", "50Mi")))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pods {
			_ = ResourceConfigForPod(p, PodResourceOptions{})
		}
	}
}
