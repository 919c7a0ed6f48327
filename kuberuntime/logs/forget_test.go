package logs

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestPerPodStateForgotten (issue 29): rotation keeps nothing per
// container between passes: a rotated file is in flight only while it is
// queued or being compressed.
func TestPerPodStateForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 3, MonitorInterval: 10 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.m.Run(ctx) }()
		synctest.Wait()
		for range 3 {
			e.write(1200)
			e.clk.Step(10 * time.Second)
			synctest.Wait()
		}
		e.clk.Step(10 * time.Second)
		synctest.Wait()
		if got := e.files(); len(got) < 2 || !strings.HasSuffix(got[1], ".gz") {
			t.Fatalf("rotated files: %v", got)
		}
		n := 0
		e.m.inflight.Range(func(any, any) bool { n++; return true })
		if n != 0 {
			t.Errorf("%d rotated files still in flight after the compressor finished", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
