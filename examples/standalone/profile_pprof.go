//go:build pprof

package main

import (
	"os"
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
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
