package podconfig

import (
	"fmt"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func benchPod(src, i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: types.UID(fmt.Sprintf("uid-%d-%d", src, i)), Name: fmt.Sprintf("pod-%d-%d", src, i), Namespace: "ns",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app", Image: "registry.local/app:1.2.3",
				Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Env:   []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				},
			}},
			RestartPolicy: v1.RestartPolicyAlways,
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func benchSources(total int) [][]*v1.Pod {
	srcs := make([][]*v1.Pod, 3)
	for i := 0; i < total; i++ {
		srcs[i%3] = append(srcs[i%3], benchPod(i%3, i))
	}
	return srcs
}

var sourceNames = []string{"file", "http", "api"}

func BenchmarkMergeInitial(b *testing.B) {
	for _, n := range []int{110, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			srcs := benchSources(n)
			b.ReportAllocs()
			for b.Loop() {
				c, _ := newTestConfig(b, Incremental)
				for i, pods := range srcs {
					c.Merge(sourceNames[i], kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods})
				}
			}
		})
	}
}

func BenchmarkResyncUnchanged(b *testing.B) {
	for _, n := range []int{110, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			srcs := benchSources(n)
			c, _ := newTestConfig(b, Incremental)
			for i, pods := range srcs {
				c.Merge(sourceNames[i], kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods})
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, pods := range srcs {
					if out := c.Merge(sourceNames[i], kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods}); len(out) != 0 {
						b.Fatalf("unchanged resync emitted %v", summary(out))
					}
				}
			}
		})
	}
}

func BenchmarkResyncOneStatusChanged(b *testing.B) {
	for _, n := range []int{110, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			srcs := benchSources(n)
			c, _ := newTestConfig(b, Incremental)
			for i, pods := range srcs {
				c.Merge(sourceNames[i], kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods})
			}
			phases := []v1.PodPhase{v1.PodRunning, v1.PodPending}
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				k++
				srcs[0][0].Status.Phase = phases[k%2]
				if out := c.Merge(sourceNames[0], kubetypes.PodUpdate{Op: kubetypes.SET, Pods: srcs[0]}); len(out) != 1 || out[0].Op != kubetypes.RECONCILE {
					b.Fatalf("got %v", summary(out))
				}
			}
		})
	}
}

// BenchmarkFingerprint is the per-pod cost of the unchanged-check: one
// pass over spec, labels, annotations and status.
func BenchmarkFingerprint(b *testing.B) {
	f := newFingerprinter()
	p := benchPod(0, 1)
	b.ReportAllocs()
	for b.Loop() {
		f.sums(p)
	}
}
