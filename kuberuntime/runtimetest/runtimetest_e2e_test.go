//go:build e2e

package runtimetest_test

import (
	"os"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kuberuntime/runtimetest"
)

func containerdEndpoint(t *testing.T) *runtimetest.Endpoint {
	t.Helper()
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if endpoint == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT is not set: start containerd with `bash hack/containerd.sh start` and source its env file")
	}
	c, err := remote.New(remote.Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(t.Context()) })
	return &runtimetest.Endpoint{
		Runtime:      c,
		Images:       c,
		Clock:        clock.RealClock{},
		Step:         time.Sleep, // e2e: real time passes while we poll
		Tick:         200 * time.Millisecond,
		Slack:        1500 * time.Millisecond,
		PauseImage:   envOr("NODEKIT_PAUSE_IMAGE", "localhost/nodekit/pause:1"),
		BusyboxImage: envOr("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1"),
		MissingImage: "localhost/nodekit/missing:1",
		LogRoot:      t.TempDir(),
		Namespace:    "nodekit-e2e",
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestConformanceContainerd(t *testing.T) {
	runtimetest.RunConformance(t, containerdEndpoint)
}

func TestScenariosContainerd(t *testing.T) {
	runtimetest.RunScenarios(t, containerdEndpoint)
}
