package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestClient(t *testing.T, f *fakeCluster, dir string, rotate bool) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{NodeName: "node-1", CertDir: filepath.Join(dir, "pki"),
		BootstrapKubeconfig: writeBootstrapKubeconfig(t, dir), Rotate: rotate, NewClientset: f.newClientset,
		Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewClientRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]ClientConfig{
		"NodeName":          {CertDir: "/x"},
		"CertDir":           {NodeName: "n"},
		"RequestedLifetime": {NodeName: "n", CertDir: "/x", RequestedLifetime: time.Minute},
		"WaitTimeout":       {NodeName: "n", CertDir: "/x", WaitTimeout: -1},
	} {
		_, err := NewClient(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBootstrapCSRContent: the CSR is the kubelet's (signer, usages,
// subject, an ECDSA P-256 key, a name derived from what it asks) and the
// pair, the link and the kubeconfig are written with their modes.
func TestBootstrapCSRContent(t *testing.T) {
	dir := t.TempDir()
	f := newFakeCluster(t, issue, time.Hour)
	c := newTestClient(t, f, dir, false)
	cfg, err := c.Bootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	csrs, _ := f.csrs()
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs, want 1", len(csrs))
	}
	csr := csrs[0]
	if csr.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" {
		t.Errorf("signer %q", csr.Spec.SignerName)
	}
	if want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}; !slices.Equal(csr.Spec.Usages, want) {
		t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
	}
	if !regexp.MustCompile(`^node-csr-[A-Za-z0-9_-]{43}$`).MatchString(csr.Name) {
		t.Errorf("CSR name %q", csr.Name)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if req.Subject.CommonName != "system:node:node-1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", req.Subject)
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) != 0 {
		t.Errorf("client CSR with SANs: %v %v", req.DNSNames, req.IPAddresses)
	}
	if pub, ok := req.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", req.PublicKey)
	}
	// The bootstrap credential asked.
	if len(f.configs) != 1 || f.configs[0].BearerToken != "abcdef.0123456789abcdef" {
		t.Errorf("CSR client configs %+v", f.configs)
	}

	pki := filepath.Join(dir, "pki")
	checkMode(t, pki, 0o700|os.ModeDir)
	link := filepath.Join(pki, "kubelet-client-current.pem")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`/kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$`).MatchString(target) {
		t.Errorf("link target %s", target)
	}
	checkMode(t, target, 0o600)
	checkMode(t, filepath.Join(pki, "kubelet.kubeconfig"), 0o600)
	if _, err := os.Stat(filepath.Join(pki, PendingKeyFile)); !os.IsNotExist(err) {
		t.Errorf("pending key left: %v", err)
	}
	// The kubeconfig: the bootstrap's server, the pair's link as user.
	kc, err := clientcmd.LoadFromFile(filepath.Join(pki, "kubelet.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	ai := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if ai.ClientCertificate != link || ai.ClientKey != link || ai.Token != "" {
		t.Errorf("kubeconfig user %+v", ai)
	}
	if cl := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]; cl.Server != "https://127.0.0.1:6443" || !cl.InsecureSkipTLSVerify {
		t.Errorf("kubeconfig cluster %+v", cl)
	}
	if cfg.CertFile != link || cfg.BearerToken != "" {
		t.Errorf("rest config cert %q token %q", cfg.CertFile, cfg.BearerToken)
	}
	// Nothing of the key in the kubeconfig itself.
	data, _ := os.ReadFile(filepath.Join(pki, "kubelet.kubeconfig"))
	if strings.Contains(string(data), "PRIVATE KEY") || strings.Contains(string(data), "client-key-data") {
		t.Error("the kubeconfig holds key data")
	}

	// A second agent start uses the stored pair: no CSR.
	c2 := newTestClient(t, f, dir, false)
	if _, err := c2.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if csrs, _ := f.csrs(); len(csrs) != 1 {
		t.Errorf("a valid certificate was asked again: %d CSRs", len(csrs))
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != want {
		t.Errorf("%s: mode %v, want %v", path, st.Mode(), want)
	}
}

// TestBootstrapDeniedOrFailed: a denied or failed CSR is a clear error;
// the pending key stays (0600) and is reused by the next try.
func TestBootstrapDeniedOrFailed(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want error
		text string
	}{{deny, ErrDenied, `reason "NotAllowed", message "no such node"`}, {fail, ErrFailed, `reason "SignerError", message "the CA is gone"`}} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			f := newFakeCluster(t, tc.mode, time.Hour)
			_, err := newTestClient(t, f, dir, false).Bootstrap(t.Context())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err %v, want %v with %s", err, tc.want, tc.text)
			}
			pendingKey := filepath.Join(dir, "pki", PendingKeyFile)
			checkMode(t, pendingKey, 0o600)
			if _, err := os.Stat(filepath.Join(dir, "pki", "kubelet.kubeconfig")); !os.IsNotExist(err) {
				t.Errorf("kubeconfig written after a %s: %v", tc.mode, err)
			}
			_, err = newTestClient(t, f, dir, false).Bootstrap(t.Context())
			if !errors.Is(err, tc.want) {
				t.Fatalf("second try: %v", err)
			}
			csrs, _ := f.csrs()
			if len(csrs) != 2 || string(pubKeyOf(t, csrs[0])) != string(pubKeyOf(t, csrs[1])) {
				t.Errorf("the second try did not reuse the pending key (%d CSRs)", len(csrs))
			}
		})
	}
}

func pubKeyOf(t *testing.T, csr *certificatesv1.CertificateSigningRequest) []byte {
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(req.PublicKey)
	return der
}

// TestBootstrapWaitIsCancellable: a CSR nobody approves is waited for
// until ctx ends, then Bootstrap returns ctx's error.
func TestBootstrapWaitIsCancellable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		syncErrorBackoff(t)
		f := newFakeCluster(t, pending, time.Hour)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		_, err := newTestClient(t, f, t.TempDir(), false).Bootstrap(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if d := time.Since(start); d != 5*time.Minute {
			t.Errorf("returned after %v, want 5m", d)
		}
	})
}

// TestExpiredCertificateFallsBackToBootstrap: a stored certificate that
// expired while the agent was down is replaced through the bootstrap
// credential at the next start.
func TestExpiredCertificateFallsBackToBootstrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		syncErrorBackoff(t)
		dir := t.TempDir()
		f := newFakeCluster(t, issue, time.Hour)
		if _, err := newTestClient(t, f, dir, true).Bootstrap(t.Context()); err != nil {
			t.Fatal(err)
		}
		advance(2 * time.Hour) // the agent is down; its certificate expires
		c := newTestClient(t, f, dir, true)
		if _, err := c.Bootstrap(t.Context()); err != nil {
			t.Fatal(err)
		}
		csrs, _ := f.csrs()
		if len(csrs) != 2 {
			t.Fatalf("%d CSRs, want 2", len(csrs))
		}
		for i, cfg := range f.configs {
			if cfg.BearerToken != "abcdef.0123456789abcdef" {
				t.Errorf("CSR %d asked without the bootstrap token", i)
			}
		}
		cur := c.Current()
		if cur == nil || !time.Now().Before(cur.Leaf.NotAfter) {
			t.Fatalf("current certificate %v", cur)
		}
	})
}

// TestRotationTiming: Run renews the certificate at Rand's point of the
// 70-90 % window of its lifetime (exactly, on virtual time), with a new
// key and the current certificate as credential, and closes every
// connection of the rest config then.
func TestRotationTiming(t *testing.T) {
	for _, tc := range []struct {
		rand float64
		want time.Duration
	}{{0, 70 * time.Second}, {0.5, 80 * time.Second}, {0.999, 89*time.Second + 980*time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			syncErrorBackoff(t)
			dir := t.TempDir()
			f := newFakeCluster(t, issue, 100*time.Second)
			c := newTestClient(t, f, dir, true)
			c.cfg.Rand = func() float64 { return tc.rand }
			// Connections through net.Pipe: their closing is seen.
			var far net.Conn
			c.dial = func(context.Context, string, string) (net.Conn, error) {
				near, other := net.Pipe()
				far = other
				return near, nil
			}
			if _, err := c.Bootstrap(t.Context()); err != nil {
				t.Fatal(err)
			}
			first := c.Current()
			if first == nil {
				t.Fatal("no certificate after Bootstrap")
			}
			if _, err := c.dialer.DialContext(t.Context(), "tcp", "api:443"); err != nil {
				t.Fatal(err)
			}
			closed := make(chan time.Time)
			go func() {
				_, _ = far.Read(make([]byte, 1))
				closed <- time.Now()
			}()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- c.Run(ctx) }()

			at := <-closed
			_, times := f.csrs()
			if len(times) != 2 {
				t.Fatalf("%d CSRs at the rotation, want 2", len(times))
			}
			if got := times[1].Sub(first.Leaf.NotBefore); got != tc.want {
				t.Errorf("rand %v: renewed at %v of a 100s lifetime, want %v", tc.rand, got, tc.want)
			}
			if !at.Equal(times[1]) {
				t.Errorf("connections closed at %v, the renewal at %v", at, times[1])
			}
			second := c.Current()
			if second == first || second.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
				t.Error("the certificate did not change")
			}
			csrs, _ := f.csrs()
			if string(pubKeyOf(t, csrs[0])) == string(pubKeyOf(t, csrs[1])) {
				t.Error("the renewal reused the key")
			}
			// Asked with the current certificate, not the bootstrap token.
			if last := f.configs[len(f.configs)-1]; last.BearerToken != "" || last.Transport == nil {
				t.Errorf("renewal client: token %q, transport %v", last.BearerToken, last.Transport)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestRotationRetriesWithBackoff: a renewal that fails (the CSR is
// denied) is tried again after 2, 4, 8, 16, 32, 32 s.
func TestRotationRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		syncErrorBackoff(t)
		f := newFakeCluster(t, issue, 100*time.Second)
		c := newTestClient(t, f, t.TempDir(), true)
		if _, err := c.Bootstrap(t.Context()); err != nil {
			t.Fatal(err)
		}
		f.setMode(deny)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		advance(80*time.Second + 2*time.Second + 4*time.Second + 8*time.Second + 16*time.Second + 32*time.Second + 32*time.Second + time.Millisecond)
		synctest.Wait()
		_, times := f.csrs()
		var gaps []time.Duration
		for i := 2; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 32 * time.Second}
		if !slices.Equal(gaps, want) {
			t.Errorf("retries %v, want %v", gaps, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestRunBeforeBootstrapAndTwice(t *testing.T) {
	f := newFakeCluster(t, issue, time.Hour)
	c := newTestClient(t, f, t.TempDir(), true)
	if err := c.Run(t.Context()); !errors.Is(err, ErrNotBootstrapped) {
		t.Errorf("Run before Bootstrap: %v", err)
	}
	if err := c.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
		t.Errorf("second Run: %v", err)
	}
}

func TestRotateNeedsACertificate(t *testing.T) {
	dir := t.TempDir()
	c, err := NewClient(ClientConfig{NodeName: "n", CertDir: dir, Kubeconfig: writeBootstrapKubeconfig(t, dir), Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bootstrap(t.Context()); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "no client certificate") {
		t.Errorf("Rotate with a token kubeconfig and no bootstrap: %v", err)
	}
}
