package excerts

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit"
)

func TestFlags(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.Enabled() || f.Rotate || f.RotateServer {
		t.Errorf("on by default: %+v", f)
	}
	if _, err := f.Dir(""); err == nil {
		t.Error("a cert dir without --cert-dir or --root")
	}
	if d, err := f.Dir("/var/lib/nk"); err != nil || d != filepath.Join("/var/lib/nk", "pki") {
		t.Errorf("default cert dir %q %v", d, err)
	}
	if get, err := f.Serving(nodekit.NewBuilder(), fake.NewClientset(), "n", "/r", nil, nil); get != nil || err != nil {
		t.Errorf("serving without the flag: %v", err)
	}
	if err := fs.Parse([]string{"--bootstrap-kubeconfig=b", "--cert-dir=c", "--rotate-certificates", "--rotate-server-certificates"}); err != nil {
		t.Fatal(err)
	}
	if !f.Enabled() || !f.Rotate || !f.RotateServer || f.BootstrapKubeconfig != "b" {
		t.Errorf("parsed %+v", f)
	}
	if d, _ := f.Dir(""); d != filepath.Join(mustAbs(t, "."), "c") {
		t.Errorf("--cert-dir %q", d)
	}
	if get, err := f.Serving(nodekit.NewBuilder(), fake.NewClientset(), "n", "/r", nil, nil); get == nil || err != nil {
		t.Errorf("serving with the flag: %v", err)
	}
}

func TestCheck(t *testing.T) {
	var f Flags
	for _, c := range []struct {
		node          string
		serverOrToken bool
		want          string
	}{
		{"n", false, ""},
		{"", false, "--node-name is required"},
		{"n", true, "take --kubeconfig, not --server/--token"},
	} {
		err := f.Check(c.node, c.serverOrToken)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%q, %v) = %v, want %q", c.node, c.serverOrToken, err, c.want)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
