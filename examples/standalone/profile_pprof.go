//go:build pprof

package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// startCPUProfile profiles the process into path until the returned func is
// called. Only in binaries built with -tags pprof: runtime/pprof adds about
// 120 kB to a binary whose size has a budget.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	// 1 kHz instead of pprof's 100 Hz: an agent starting 30 pods uses
	// about half a second of CPU, 50 samples at 100 Hz. StartCPUProfile
	// then logs that the rate was already set, and keeps it.
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
