package nodekit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodekit/nodekit"
)

func TestWithNodeReadyCheck(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).WithNodeReadyCheck(nil).Build()
	if err == nil || !strings.Contains(err.Error(), "WithNodeReadyCheck") {
		t.Fatalf("Build with a nil check: %v, want an error naming WithNodeReadyCheck", err)
	}
	down := errors.New("down")
	a, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithNodeReadyCheck(func() error { return down }).Build()
	if err != nil {
		t.Fatal(err)
	}
	if cs := a.NodeReadyChecks(); len(cs) != 1 || cs[0]() != down {
		t.Fatalf("checks %d, want the one given", len(cs))
	}
	if a.NodeName() != "n" || a.Clock() == nil {
		t.Errorf("NodeName %q, Clock %v", a.NodeName(), a.Clock())
	}
	a.RequestNodeStatusUpdate()
	a.RequestNodeStatusUpdate() // never blocks
	select {
	case <-a.NodeStatusUpdateRequests():
	default:
		t.Fatal("no request delivered")
	}
	select {
	case <-a.NodeStatusUpdateRequests():
		t.Fatal("two requests delivered, want them merged into one")
	default:
	}
}
