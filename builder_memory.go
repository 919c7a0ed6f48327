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

// WithIdleMemoryRelease sets whether the agent returns the process's freed
// memory to the OS (runtime/debug.FreeOSMemory) when the node becomes idle:
// no pod left and the runtime empty, once container GC has removed the
// last dead container. Without it an agent that ran many pods keeps its
// freed heap for minutes, as any Go program does (the runtime gives memory
// back slowly, and only down to about its heap goal), so that its idle RSS
// stays well above what it was before its first pod. The call runs a
// garbage collection of the whole process, at most once a minute per agent
// and only on that transition. It is off by default, because it acts on
// the whole process: a program that runs one agent (examples/standalone,
// examples/edge and examples/cluster turn it on) wants it; one that runs
// many agents (examples/simulate) or manages its own memory does not.
func (b *Builder) WithIdleMemoryRelease(on bool) *Builder { b.idleMemoryRelease = on; return b }

// idleRelease is the sync loop's Idle hook: release, at most once per
// idleReleaseMinInterval.
func idleRelease(release func(), clk clock.PassiveClock, log *zap.Logger) func() {
	var last time.Time
	return func() {
		if now := clk.Now(); last.IsZero() || now.Sub(last) >= idleReleaseMinInterval {
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
