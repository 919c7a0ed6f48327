package eviction_test

import (
	"fmt"

	"github.com/nodekit/nodekit/eviction"
)

// On cgroup v1 the notifier asks the kernel to signal when
// memory.usage_in_bytes crosses the usage at which the working set (usage
// minus inactive file pages) leaves only the threshold available.
func ExampleMemcgUsageThreshold() {
	ts, err := eviction.ParseThresholds(map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	const mi = 1 << 20
	capacity := int64(8192 * mi)     // available + working set
	inactiveFile := int64(1024 * mi) // total_inactive_file from memory.stat
	usage := eviction.MemcgUsageThreshold(ts[0], capacity, inactiveFile)
	fmt.Printf("%s: arm memory.usage_in_bytes at %d bytes (%dMi)\n", ts[0], usage, usage/mi)
	// Output:
	// memory.available<100Mi: arm memory.usage_in_bytes at 9558818817 bytes (9116Mi)
}
