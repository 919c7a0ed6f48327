package containermgr

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Slow quantities in hugepages-<size> resource names (issue 23, item 1) are
// ignored quickly in pod sizing and in the allocatable cgroup values.
func TestHugePagesSlowSizeInName(t *testing.T) {
	slow := v1.ResourceList{
		"hugepages-1e-99999999": resource.MustParse("2Mi"),
		"hugepages-2Mi":         resource.MustParse("4Mi"),
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers:     []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Limits: slow}}},
		InitContainers: []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: slow}}},
	}}
	start := time.Now()
	hp := hugePagesOf(pod)
	rc := ResourceConfigForLimits(slow)
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("sizing took %v for a slow size in a resource name", d)
	}
	if len(hp) != 1 || hp[2<<20] != 4<<20 {
		t.Errorf("hugePagesOf = %v, want only 2Mi pages", hp)
	}
	if len(rc.HugePageLimit) != 1 || rc.HugePageLimit[2<<20] != 4<<20 {
		t.Errorf("ResourceConfigForLimits hugepages = %v, want only 2Mi pages", rc.HugePageLimit)
	}
}
