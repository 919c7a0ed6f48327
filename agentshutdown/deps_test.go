package agentshutdown_test

import (
	"os/exec"
	"strings"
	"testing"
)

// An agent with the graceful shutdown but without logind's watcher links
// no D-Bus code: only nodeshutdown/systemd imports godbus.
func TestNoDBusWithoutSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/godbus/") || strings.HasPrefix(d, "github.com/nodekit/nodekit/nodeshutdown/systemd") {
			t.Errorf("agentshutdown depends on %s", d)
		}
	}
}
