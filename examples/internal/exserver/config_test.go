package exserver

import (
	"flag"
	"testing"
	"time"

	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/kubeletconfig"
)

// The file's values fill the flags not given; the flags given win, and
// the configuration shows them; --port 0 and enableServer false agree.
func TestFromConfig(t *testing.T) {
	load := func(doc string) *kc.KubeletConfiguration {
		c, err := kubeletconfig.Decode([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + doc))
		if err != nil {
			t.Fatal(err)
		}
		kubeletconfig.SetDefaults(c)
		return c
	}
	parse := func(args ...string) (*Flags, exconfig.Given) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		var f Flags
		f.Register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f, exconfig.GivenFlags(fs)
	}
	c := load("port: 10300\naddress: 127.0.0.1\nstreamingConnectionIdleTimeout: 1h\nauthorization: {mode: AlwaysAllow, webhook: {cacheAuthorizedTTL: 7s}}\n")
	f, g := parse("--address", "127.0.0.2", "--anonymous-auth")
	f.FromConfig(c, g)
	switch {
	case f.Port != 10300 || f.IdleTimeout != time.Hour || f.AuthzMode != "AlwaysAllow" || f.authorizedTTL != 7*time.Second:
		t.Errorf("file values not taken: %+v", f)
	case f.Address != "127.0.0.2" || c.Address != "127.0.0.2" || !f.Anonymous || !*c.Authentication.Anonymous.Enabled:
		t.Errorf("flags given do not win: flags %+v, config address %q", f, c.Address)
	}
	c = load("enableServer: false\n")
	f, g = parse()
	f.FromConfig(c, g)
	if f.Port != 0 || c.Port != 10250 {
		t.Errorf("enableServer false: port flag %d, config %d", f.Port, c.Port)
	}
	c = load("")
	f, g = parse("--port", "0")
	f.FromConfig(c, g)
	if f.Port != 0 || *c.EnableServer || c.Port != 10250 {
		t.Errorf("--port 0: flag %d, enableServer %v, port %d", f.Port, *c.EnableServer, c.Port)
	}
}
