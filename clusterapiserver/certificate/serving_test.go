package certificate

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
)

func TestServingTemplate(t *testing.T) {
	got := ServingTemplate("node-1", []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "node-1.example"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: v1.NodeExternalIP, Address: "fd00::5"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: v1.NodeInternalDNS, Address: "a.internal"},
		{Type: v1.NodeHostName, Address: "192.168.1.1"},
		{Type: v1.NodeInternalIP, Address: "not-an-ip"},
	})
	if got.Subject.CommonName != "system:node:node-1" || !slices.Equal(got.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", got.Subject)
	}
	if !slices.Equal(got.DNSNames, []string{"a.internal", "node-1.example"}) {
		t.Errorf("DNS names %v", got.DNSNames)
	}
	var ips []string
	for _, ip := range got.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"10.0.0.5", "192.168.1.1", "fd00::5"}) {
		t.Errorf("IPs %v", ips)
	}
	if ServingTemplate("n", []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n"}}) != nil {
		t.Error("a template without an IP")
	}
}

type addresses struct {
	mu sync.Mutex
	a  []v1.NodeAddress
}

func (a *addresses) get() []v1.NodeAddress {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.a)
}

func (a *addresses) set(ips ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.a = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "node-1"}}
	for _, ip := range ips {
		a.a = append(a.a, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
}

// TestServingCertificate: Run asks for a kubelet-serving certificate with
// the node's addresses once it has an IP, GetCertificate serves it, it is
// renewed at 70-90 % of its lifetime and at once when an address is added.
func TestServingCertificate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		syncErrorBackoff(t)
		f := newFakeCluster(t, issue, 100*time.Second)
		addrs := &addresses{}
		addrs.set()
		dir := filepath.Join(t.TempDir(), "pki")
		s, err := NewServing(ServingConfig{NodeName: "node-1", Client: f, CertDir: dir, Addresses: addrs.get, Rand: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetCertificate(nil); !errors.Is(err, ErrNoServingCertificate) {
			t.Errorf("before Run: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		advance(time.Minute)
		synctest.Wait()
		if csrs, _ := f.csrs(); len(csrs) != 0 {
			t.Fatalf("%d CSRs without an IP", len(csrs))
		}
		addrs.set("10.0.0.5")
		advance(TemplateCheckPeriod)
		synctest.Wait()
		csrs, times := f.csrs()
		if len(csrs) != 1 {
			t.Fatalf("%d CSRs, want 1", len(csrs))
		}
		csr := csrs[0]
		if csr.Spec.SignerName != "kubernetes.io/kubelet-serving" {
			t.Errorf("signer %q", csr.Spec.SignerName)
		}
		if want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}; !slices.Equal(csr.Spec.Usages, want) {
			t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
		}
		block, _ := pem.Decode(csr.Spec.Request)
		req, _ := x509.ParseCertificateRequest(block.Bytes)
		if req.Subject.CommonName != "system:node:node-1" || !slices.Equal(req.DNSNames, []string{"node-1"}) ||
			len(req.IPAddresses) != 1 || !req.IPAddresses[0].Equal(net.ParseIP("10.0.0.5")) {
			t.Errorf("request %v %v %v", req.Subject, req.DNSNames, req.IPAddresses)
		}
		cert, err := s.GetCertificate(nil)
		if err != nil || cert.Leaf == nil || cert.Leaf.Subject.CommonName != "system:node:node-1" {
			t.Fatalf("GetCertificate: %v %v", cert, err)
		}
		checkMode(t, dir, 0o700|os.ModeDir)
		target, _ := os.Readlink(filepath.Join(dir, "kubelet-server-current.pem"))
		if !strings.Contains(target, "kubelet-server-") {
			t.Errorf("link target %q", target)
		}
		checkMode(t, target, 0o600)

		// Renewed at 80 % of its 100 s.
		advance(80*time.Second - time.Since(times[0]) + time.Millisecond)
		synctest.Wait()
		_, times = f.csrs()
		if len(times) != 2 || times[1].Sub(cert.Leaf.NotBefore) != 80*time.Second {
			t.Fatalf("renewals at %v, want the second 80s after %v", times, cert.Leaf.NotBefore)
		}
		renewed, _ := s.GetCertificate(nil)
		if renewed == cert {
			t.Error("GetCertificate still gives the first certificate")
		}
		// A new address: a certificate with it, at the next check.
		addrs.set("10.0.0.5", "fd00::5")
		advance(TemplateCheckPeriod)
		synctest.Wait()
		if csrs, _ := f.csrs(); len(csrs) != 3 {
			t.Fatalf("%d CSRs after an address was added, want 3", len(csrs))
		}
		last, _ := s.GetCertificate(nil)
		if len(last.Leaf.IPAddresses) != 2 {
			t.Errorf("IPs of the new certificate %v", last.Leaf.IPAddresses)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestNewServingRefusesBadConfig(t *testing.T) {
	f := newFakeCluster(t, issue, time.Hour)
	get := func() []v1.NodeAddress { return nil }
	for name, cfg := range map[string]ServingConfig{
		"NodeName":  {Client: f, CertDir: "/x", Addresses: get},
		"Client":    {NodeName: "n", CertDir: "/x", Addresses: get},
		"CertDir":   {NodeName: "n", Client: f, Addresses: get},
		"Addresses": {NodeName: "n", Client: f, CertDir: "/x"},
	} {
		if _, err := NewServing(cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
