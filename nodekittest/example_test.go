package nodekittest_test

import (
	"fmt"

	"github.com/nodekit/nodekit/nodekittest"
)

// When a container that exits at once is started, at the agent's default
// periods without jitter (TestCrashLoopBackOff checks the agent keeps to it).
func ExampleCrashLoopStarts() {
	fmt.Println(nodekittest.CrashLoopStarts(7))
	// Output:
	// [0s 1s 12s 33s 1m14s 2m35s 5m16s]
}
