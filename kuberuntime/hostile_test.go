package kuberuntime

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A hugepages resource whose size is a slow quantity (issue 23, item 1) is
// ignored quickly, not parsed for seconds on every sync.
func TestHugepageLimitsSlowSizeInName(t *testing.T) {
	start := time.Now()
	got := hugepageLimits(v1.ResourceList{
		"hugepages-1e-99999999": resource.MustParse("2Mi"),
		"hugepages-2Mi":         resource.MustParse("4Mi"),
	})
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("hugepageLimits took %v for a slow size in a resource name", d)
	}
	if len(got) != 1 || got[0].PageSize != "2MB" || got[0].Limit != 4<<20 {
		t.Fatalf("hugepageLimits = %v, want only 2MB=4Mi", got)
	}
}
