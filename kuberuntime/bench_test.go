package kuberuntime

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func BenchmarkComputePodActions110Pods(b *testing.B) {
	m, _, _ := newTestManager(b, nil)
	pods := make([]*v1.Pod, 110)
	statuses := make([]*kubetypes.PodStatus, 110)
	for i := range pods {
		pods[i], statuses[i] = basePod()
		pods[i].UID = types.UID(fmt.Sprintf("uid-%d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range pods {
			a := m.ComputePodActions(pods[i], statuses[i])
			if a.KillPod {
				b.Fatal("unexpected kill")
			}
		}
	}
}

func BenchmarkSyncPodNoChange(b *testing.B) {
	m, cri, _ := newTestManager(b, nil)
	pod := simplePod("bench", "img:1", "img:2", "img:3")
	ctx := context.Background()
	if res := m.SyncPod(ctx, pod, nil, nil); res.Err() != nil {
		b.Fatal(res.Err())
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	cri.resetCalls()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := m.SyncPod(ctx, pod, st, nil); len(res.Steps) != 0 {
			b.Fatal("not a no-op")
		}
	}
	b.StopTimer()
	if w := cri.writeCalls(); len(w) != 0 {
		b.Fatalf("writes %v", w)
	}
}
