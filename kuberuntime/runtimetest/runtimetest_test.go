package runtimetest_test

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kuberuntime/runtimetest"
)

const (
	pauseImage   = "localhost/nodekit/pause:1"
	busyboxImage = "localhost/nodekit/busybox:1"
	missingImage = "localhost/nodekit/missing:1"
)

func newFake(t *testing.T) (*fake.Runtime, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{
		Clock:         fc,
		Images:        []string{pauseImage, busyboxImage},
		Missing:       []string{missingImage},
		RequireImages: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt, fc
}

// settle waits (in real time, briefly) until something blocks on the fake
// clock, so stepping it does not run ahead of a goroutine about to wait.
func settle(fc *clocktesting.FakeClock) func() {
	return func() {
		deadline := time.Now().Add(20 * time.Millisecond)
		for !fc.HasWaiters() && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		// One goroutine waiting does not mean its siblings (e.g. the other
		// containers KillPod stops in parallel) have made their calls yet:
		// give them a moment of real time before the clock moves on.
		for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
			runtime.Gosched()
		}
	}
}

func endpoint(t *testing.T, rt *fake.Runtime, fc *clocktesting.FakeClock) *runtimetest.Endpoint {
	return &runtimetest.Endpoint{
		Runtime: rt, Images: rt, Clock: fc, Step: fc.Step, Settle: settle(fc), Received: rt.CallsReceived,
		PauseImage: pauseImage, BusyboxImage: busyboxImage, MissingImage: missingImage,
		LogRoot: t.TempDir(),
	}
}

func fakeEndpoint(t *testing.T) *runtimetest.Endpoint {
	rt, fc := newFake(t)
	return endpoint(t, rt, fc)
}

// remoteFakeEndpoint serves the fake over a unix socket and reaches it
// through runtime/remote, as a real runtime would be reached.
func remoteFakeEndpoint(t *testing.T) *runtimetest.Endpoint {
	rt, fc := newFake(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rt.Serve(ctx, lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := remote.New(remote.Config{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.WithoutCancel(t.Context()))
		cancel()
		wg.Wait()
	})
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	e := endpoint(t, rt, fc)
	e.Runtime, e.Images = c, c
	// A reply crosses the socket while the suite keeps stepping the fake
	// clock, so under -race and load a timed call can end a step or a few
	// late (StopTimeout once measured 2.1s for 2s). The in-process fake
	// keeps the exact timings (Slack 0); this endpoint checks the
	// transport, with a second of slack.
	e.Slack = time.Second
	return e
}

func TestConformanceFake(t *testing.T)       { runtimetest.RunConformance(t, fakeEndpoint) }
func TestScenariosFake(t *testing.T)         { runtimetest.RunScenarios(t, fakeEndpoint) }
func TestConformanceFakeRemote(t *testing.T) { runtimetest.RunConformance(t, remoteFakeEndpoint) }
func TestScenariosFakeRemote(t *testing.T)   { runtimetest.RunScenarios(t, remoteFakeEndpoint) }
