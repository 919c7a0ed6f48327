//go:build !pprof

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCPUProfileNeedsTag(t *testing.T) {
	stop, err := startCPUProfile(filepath.Join(t.TempDir(), "cpu.pprof"))
	if err == nil || stop != nil || !strings.Contains(err.Error(), "-tags pprof") {
		t.Fatalf("got %v, %v", stop != nil, err)
	}
}
