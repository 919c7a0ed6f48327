//go:build !pprof

package main

import "errors"

// startCPUProfile fails: this binary was built without -tags pprof.
func startCPUProfile(string) (func(), error) {
	return nil, errors.New("this binary was built without profiling: build it with -tags pprof")
}
