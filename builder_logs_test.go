package nodekit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime/logs"
)

func logsBuilder(t *testing.T) *nodekit.Builder {
	return nodekit.NewBuilder().WithNodeName("node1").WithRootDir(t.TempDir())
}

func TestContainerLogRotationWiring(t *testing.T) {
	// Off by default on the fake runtime, on with the option.
	a, err := logsBuilder(t).WithFakeRuntime().Build()
	if err != nil || a.LogRotation() != nil {
		t.Fatalf("fake runtime: rotation %v, %v", a.LogRotation(), err)
	}
	a, err = logsBuilder(t).WithFakeRuntime().WithContainerLogRotation(logs.Config{MaxSize: 1 << 20, MonitorInterval: time.Second}).Build()
	if err != nil || a.LogRotation() == nil {
		t.Fatalf("fake runtime with the option: rotation %v, %v", a.LogRotation(), err)
	}
	// On by default for a CRI endpoint (Build does no I/O), off with a
	// negative MaxSize.
	a, err = logsBuilder(t).WithRuntimeEndpoint("unix:///nonexistent/cri.sock").Build()
	if err != nil || a.LogRotation() == nil || a.LogRotation().Disabled() {
		t.Fatalf("CRI endpoint: rotation %v, %v", a.LogRotation(), err)
	}
	a, err = logsBuilder(t).WithRuntimeEndpoint("unix:///nonexistent/cri.sock").WithContainerLogRotation(logs.Config{MaxSize: -1}).Build()
	if err != nil || a.LogRotation() != nil {
		t.Fatalf("CRI endpoint, MaxSize -1: rotation %v, %v", a.LogRotation(), err)
	}
	// A bad setting is a Build error naming it.
	_, err = logsBuilder(t).WithFakeRuntime().WithContainerLogRotation(logs.Config{MaxFiles: 1}).Build()
	if !errors.Is(err, logs.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxFiles") {
		t.Fatalf("MaxFiles 1: %v", err)
	}
}
