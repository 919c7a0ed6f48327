package exserver

import (
	"flag"
	"testing"

	"github.com/nodekit/nodekit"
)

func TestFlagsDefaultsAndOff(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.Port != 10250 || f.HealthzPort != 10248 || f.HealthzAddress != "127.0.0.1" || !f.TokenWebhook || f.AuthzMode != "Webhook" || f.Anonymous {
		t.Errorf("defaults %+v", f)
	}
	// Webhook authorization needs a client.
	if _, err := f.Wire(nodekit.NewBuilder(), nil, "n", t.TempDir(), nil, nil); err == nil {
		t.Error("Wire accepted Webhook without a client")
	}
	if got := f.DeclaredFeatures(); len(got) != 1 || got[0] != "ExtendWebSocketsToKubelet" {
		t.Errorf("declared features %v", got)
	}
	if err := fs.Parse([]string{"--port=0"}); err != nil {
		t.Fatal(err)
	}
	if port, err := f.Wire(nodekit.NewBuilder(), nil, "n", t.TempDir(), nil, nil); port != 0 || err != nil || f.DeclaredFeatures() != nil {
		t.Errorf("--port=0: %d %v %v", port, err, f.DeclaredFeatures())
	}
}

func TestParseIPs(t *testing.T) {
	ips, err := ParseIPs(" 10.0.0.5, fd00::1 ,")
	if err != nil || len(ips) != 2 || ips[0].String() != "10.0.0.5" || ips[1].String() != "fd00::1" {
		t.Errorf("%v %v", ips, err)
	}
	if _, err := ParseIPs("10.0.0.5,nope"); err == nil {
		t.Error("accepted a bad address")
	}
}
