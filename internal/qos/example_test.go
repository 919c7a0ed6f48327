package qos_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/qos"
)

func ExampleClass() {
	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	// Requests equal to the limits: what API defaulting makes of limits alone.
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: limits, Limits: limits}}}}}
	fmt.Println(qos.Class(pod))
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "sidecar"})
	fmt.Println(qos.Class(pod))
	// Output:
	// Guaranteed
	// Burstable
}
