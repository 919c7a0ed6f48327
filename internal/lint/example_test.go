package lint_test

import (
	"fmt"
	"testing/fstest"

	"github.com/nodekit/nodekit/internal/lint"
)

// Checking an in-memory module: the library file reads the wall clock and
// has an init, the unit test sleeps; the opted-out call is accepted.
func ExampleCheckFS() {
	module := fstest.MapFS{
		"go.mod": {Data: []byte("module example.com/m\n\ngo 1.26\n")},
		"agent/agent.go": {Data: []byte(`package agent

import (
	"context"
	"time"
)

func init() {}

func Stamp() time.Time { return time.Now() }

func Detached() context.Context {
	//nodekit:allow context the caller asked for a detached context
	return context.Background()
}
`)},
		"agent/agent_test.go": {Data: []byte(`package agent

import (
	"testing"
	"time"
)

func TestStamp(t *testing.T) { time.Sleep(time.Millisecond) }
`)},
	}
	findings, err := lint.CheckFS(module)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	// Output:
	// agent/agent.go:8: [init] func init() is not allowed (no init side effects)
	// agent/agent.go:10: [clock] time.Now in library code: use the injected clock.Clock
	// agent/agent_test.go:8: [sleep] time.Sleep in a unit test: use a fake clock or testing/synctest (e2e-only files may poll)
}
