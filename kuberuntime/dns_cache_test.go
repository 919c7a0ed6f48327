//go:build linux

package kuberuntime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// The host resolv.conf is parsed again only when its stamp moved, and
// only a file that had not changed for resolvConfWindow when read is kept.
func TestHostResolvConfKeptWhileItsStampHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 10.0.0.1\nsearch a.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(fi.ModTime()) // read as it changes: not kept
	b := &configBuilder{cfg: &Config{DNS: DNSConfig{ResolvConf: path}, Clock: clk}}
	servers := func() []string {
		t.Helper()
		dns, err := b.podDNS(dnsPod(v1.DNSDefault, false, nil))
		if err != nil {
			t.Fatal(err)
		}
		return dns.Servers
	}
	if got := servers(); !slices.Equal(got, []string{"10.0.0.1"}) || b.resolv.dns != nil {
		t.Fatalf("servers %v, kept %v: a file read within the window must not be kept", got, b.resolv.dns)
	}
	clk.SetTime(fi.ModTime().Add(resolvConfWindow))
	if got := servers(); !slices.Equal(got, []string{"10.0.0.1"}) || b.resolv.dns == nil {
		t.Fatalf("servers %v, kept %v: a settled file must be kept", got, b.resolv.dns)
	}
	// A caller changing what it got does not change what is kept.
	dns, err := b.hostDNS()
	if err != nil {
		t.Fatal(err)
	}
	dns.Servers[0] = "changed"
	if got := servers(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("servers %v after a caller changed its copy", got)
	}
	// Replaced (same size, by rename): read again.
	tmp := filepath.Join(filepath.Dir(path), ".tmp")
	if err := os.WriteFile(tmp, []byte("nameserver 10.0.0.2\nsearch a.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(time.Now().Add(resolvConfWindow))
	if got := servers(); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Fatalf("servers %v after the file was replaced", got)
	}
	// Gone: an error, as before.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := b.hostDNS(); err == nil {
		t.Fatal("a missing resolv.conf gave no error")
	}
}
