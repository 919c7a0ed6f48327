package nodekit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// WithWiring runs the wirings' hooks in Rank order whatever the order of
// the calls, and Build reports a wiring without Call, a Call given twice,
// a wiring's Err and a Connect error, each naming it.
func TestWithWiring(t *testing.T) {
	var order []string
	hook := func(name string) nodekit.Wiring {
		return nodekit.Wiring{
			Call: name, Name: name,
			Engine: func(*kuberuntime.Config) { order = append(order, name+" engine") },
			Loop:   func(*syncloop.Config) { order = append(order, name+" loop") },
			Connect: func(a *nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
				order = append(order, name+" connect")
				return nil, nil, nil
			},
		}
	}
	later, earlier := hook("later"), hook("earlier")
	later.Rank, earlier.Rank = nodekit.RankMemoryManager, nodekit.RankContainerManager
	_, err := nodekit.NewBuilder().WithNodeName("n").WithRootDir(t.TempDir()).WithFakeRuntime().
		WithWiring(later).WithWiring(earlier).Build()
	if err != nil {
		t.Fatal(err)
	}
	want := "earlier engine, later engine, earlier loop, later loop, earlier connect, later connect"
	if got := strings.Join(order, ", "); got != want {
		t.Errorf("hooks ran in order %s, want %s", got, want)
	}

	boom := errors.New("boom")
	failing := nodekit.Wiring{Call: "x.Fails", Name: "fails", Connect: func(*nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
		return nil, nil, boom
	}}
	for _, tc := range []struct {
		name string
		b    *nodekit.Builder
		want string
	}{
		{"no Call", nodekit.NewBuilder().WithWiring(nodekit.Wiring{Name: "x"}), "WithWiring: the wiring has no Call"},
		{"twice", nodekit.NewBuilder().WithWiring(hook("a")).WithWiring(hook("a")), "a given twice"},
		{"Err", nodekit.NewBuilder().WithWiring(nodekit.Wiring{Call: "x.Nil", Err: errors.New("was given a nil manager")}), "x.Nil: was given a nil manager"},
		{"Connect error", nodekit.NewBuilder().WithWiring(failing), "fails: boom"},
	} {
		_, err := tc.b.WithNodeName("n").WithRootDir(t.TempDir()).WithFakeRuntime().Build()
		if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
