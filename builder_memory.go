package nodekit

import (
	"runtime/debug"
	"runtime/metrics"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// idleReleaseMinInterval bounds how often the agent returns memory to the
// OS: at most once a minute (container GC, which frees what dead
// containers held, runs once a minute too).
const idleReleaseMinInterval = time.Minute

// idleReleaseSettle is how long the node must have been idle before the
// release (two rounds of housekeeping at its default period): pods that
// churn empty the node for a moment between batches, and a release there
// would be undone at once.
const idleReleaseSettle = 2 * time.Second

// WithIdleMemoryRelease sets whether the agent returns the process's freed
// memory to the OS (runtime/debug.FreeOSMemory) once the node is idle: no
// pod left and the runtime empty (the pods' dead containers removed) for
// two seconds. Without it an agent that ran many pods keeps its freed heap
// for minutes, as any Go program does (the runtime gives memory back
// slowly, and only down to about its heap goal), so that its idle RSS stays
// well above what it was before its first pod. The call runs a garbage
// collection of the whole process, once per idle stretch and at most once
// a minute per agent: a stretch that begins within the minute gets its
// release when the minute is up, if the node is still idle. It is off by
// default, because it acts on the whole process: a program that runs one
// agent (examples/standalone, examples/edge and examples/cluster turn it
// on) wants it; one that runs many agents (examples/simulate) or manages
// its own memory does not.
func (b *Builder) WithIdleMemoryRelease(on bool) *Builder { b.idleMemoryRelease = on; return b }

// idleRelease is the sync loop's Idle hook, called each housekeeping round
// the node is idle with when that idle stretch began: release once per
// stretch, when the node has been idle for idleReleaseSettle and the last
// release is idleReleaseMinInterval old.
func idleRelease(release func(), clk clock.PassiveClock, log *zap.Logger) func(since time.Time) {
	var last time.Time
	return func(since time.Time) {
		now := clk.Now()
		switch {
		case !last.IsZero() && !last.Before(since): // done in this stretch
		case now.Sub(since) < idleReleaseSettle:
		case !last.IsZero() && now.Sub(last) < idleReleaseMinInterval:
		default:
			last = now
			before := heapReleased()
			release()
			after := heapReleased()
			log.Info("node idle: freed memory returned to the OS",
				zap.Uint64("releasedBytes", after-min(before, after)))
		}
	}
}

// heapReleased is the Go heap's memory returned to the OS, in bytes.
func heapReleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// freeOSMemory is the default release.
func freeOSMemory() { debug.FreeOSMemory() }
