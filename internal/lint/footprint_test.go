package lint

import (
	"os/exec"
	"strings"
	"testing"
)

// optionalParts are packages the root package must not depend on: an agent
// on the fake runtime that does not call their wiring must not link them
// (issue 27 item 5). Each is wired by a package of its own that imports the
// root package (containermgr/cmwire, containerdwire, agentserver,
// clusterapiserver, agentshutdown).
var optionalParts = []string{
	"github.com/nodekit/nodekit/containermgr", // and below: cgroups, cpu, memory, devices
	"github.com/nodekit/nodekit/kuberuntime/containerdevents",
	"github.com/nodekit/nodekit/server",
	"github.com/nodekit/nodekit/agentserver",
	"github.com/nodekit/nodekit/nodeshutdown", // and below: systemd (D-Bus)
	"github.com/nodekit/nodekit/agentshutdown",
	"github.com/nodekit/nodekit/clusterapiserver",
	"github.com/nodekit/nodekit/nodestatus",
	"github.com/opencontainers/cgroups",
	"github.com/godbus/dbus",
	"github.com/coreos/go-systemd",
	"github.com/sirupsen/logrus",
	"k8s.io/client-go",
	"k8s.io/apiserver",
}

// forbiddenDeps returns the packages of deps that are, or are below, one
// of the optional parts.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, p := range optionalParts {
			if d == p || strings.HasPrefix(d, p+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// TestRootLinksNoOptionalPart: the root package's dependencies (not its
// tests') include none of the optional parts.
func TestRootLinksNoOptionalPart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root, err := FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, want the root's dependencies", len(deps))
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Errorf("the root package depends on optional parts %v: move their Builder wiring into a package of its own (see containermgr/cmwire)", bad)
	}
}

func TestForbiddenDeps(t *testing.T) {
	got := forbiddenDeps([]string{
		"fmt", "github.com/nodekit/nodekit/kuberuntime", "github.com/nodekit/nodekit/containermgr/cpumanager",
		"github.com/godbus/dbus/v5", "github.com/nodekit/nodekit/containermgrx", "k8s.io/client-go/rest",
	})
	want := "github.com/nodekit/nodekit/containermgr/cpumanager github.com/godbus/dbus/v5 k8s.io/client-go/rest"
	if strings.Join(got, " ") != want {
		t.Errorf("forbiddenDeps = %v, want %s", got, want)
	}
}
