package kubetypes

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestHugePageSize(t *testing.T) {
	for name, want := range map[v1.ResourceName]int64{
		"hugepages-2Mi": 2 << 20, "hugepages-1Gi": 1 << 30, "hugepages-64Ki": 64 << 10, "hugepages-16Gi": 16 << 30,
	} {
		got, err := HugePageSize(name)
		if err != nil || got != want {
			t.Errorf("HugePageSize(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, name := range []v1.ResourceName{
		"hugepages-1e-99999999", "hugepages-1e99999999", "hugepages-", "hugepages-0", "hugepages--2Mi",
		"hugepages-2Xi", "hugepages-0.5", "hugepages-2Pi", "memory", "hugepages-" + v1.ResourceName(make([]byte, 40)),
	} {
		start := time.Now()
		_, err := HugePageSize(name)
		if !errors.Is(err, ErrInvalidResourceName) {
			t.Errorf("HugePageSize(%q) = %v, want ErrInvalidResourceName", name, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("HugePageSize(%q) took %v", name, d)
		}
	}
}
