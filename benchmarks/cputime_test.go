package benchmarks

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the CPU time (user + system) the process has used so far: all
// its threads, so the garbage collector's work and the implementations'
// own goroutines count too.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs body b.N times with b.Loop and reports, beside the wall time,
// the process CPU time per iteration (cpu-ns/op). On a machine shared with
// other work the wall time includes waiting for a CPU; the CPU time does
// not, so it is the steadier measure of the work done.
func loop(b *testing.B, body func()) {
	b.ReportAllocs()
	// The case's setup (input built, results compared) left garbage: collect
	// it now so neither side pays for it inside the timed loop.
	runtime.GC()
	c0 := cpuNow()
	for b.Loop() {
		body()
	}
	reportCPU(b, c0)
}

func reportCPU(b *testing.B, c0 time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
	}
}
