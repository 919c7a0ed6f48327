// Package nodekittest runs a whole nodekit agent on the fake runtime inside
// a testing/synctest bubble, for tests that assert exact times.
//
// # The recipe
//
// Inside synctest.Test every goroutine the agent starts, and every timer
// and ticker of its parts, lives in the bubble: time stands still while any
// of them can run and jumps to the next timer when all wait. The agent's
// default clock is the real one, which in a bubble is the virtual clock; do
// not pass WithClock. Start removes the remaining sources of chance: it
// sets WithRand to a constant 0 (no jitter in the pod workers' retries or
// the prober's first delay), so a run is the same every time:
//
//	func TestCrashLoop(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			h := nodekittest.Start(t, nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime("busybox:1"))
//			h.SetPods(crashingPod)
//			h.WaitFor("6 starts", 10*time.Minute, func() bool { return len(h.Starts("crash", "main")) >= 6 })
//			// h.Starts("crash", "main") is exactly [0s 1s 12s 33s 1m14s 2m35s]
//		})
//	}
//
// WaitFor wakes on every status and container event and returns the
// virtual time at which its condition first held; Advance lets a fixed
// time pass. Neither sleeps in real time. History, Status, Events and
// Starts read what happened, each stamped with its virtual time since
// Start. A test that changes the world at a given time (eviction stats,
// an exec handler's answer) does it after Advance.
//
// # What the times are
//
// The syncloop manual ("Retry timings") says when the agent retries what;
// CrashLoopStarts computes the crash-loop schedule from it. The tests of
// this package pin them down: start at 0, crash-loop starts at 0, 1, 12,
// 33, 74 and 155 s, a failed CreateContainer retried at 1 s, liveness
// restarts at 10 and 25 s (period 5 s, threshold 3), an eviction at the first
// eviction cycle after the pressure. They run 1,000 times under -race
// without a failure:
//
//	go test -race -count=1000 ./nodekittest/
//
// Keep to the fake runtime: a real CRI endpoint (gRPC, containerd) does
// I/O outside the bubble and time would not stand still for it.
package nodekittest
