package fake

import (
	"fmt"
	"testing"
)

func BenchmarkListContainers1000(b *testing.B) {
	r, _ := newFake(b, Config{MaxCalls: 1000})
	for i := range 100 {
		sb := mustRun(b, r, podConfig(fmt.Sprintf("pod-%d", i), true, nil))
		for j := range 10 {
			mustStart(b, r, sb, ctrConfig(fmt.Sprintf("c%d", j), "busybox", "sleep", "3600"))
		}
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cs, err := r.ListContainers(ctx, nil)
		if err != nil || len(cs) != 1000 {
			b.Fatal(len(cs), err)
		}
	}
}
