package certificate

import (
	"crypto/tls"
	"crypto/x509"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	testclock "k8s.io/utils/clock/testing"
)

// TestWriteKubeconfigAtomic: the kubeconfig replaces the old file by a
// rename (a reader sees the old or the new one whole), mode 0600, and a
// failed write leaves what was there and no temporary file.
func TestWriteKubeconfigAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.kubeconfig")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before syscall.Stat_t
	if err := syscall.Stat(path, &before); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Open(path) // a reader of the old file keeps it whole
	defer old.Close()
	info := clusterInfo{server: "https://10.0.0.1:6443", caData: []byte("ca")}
	if err := writeKubeconfig(path, info, "/pki/kubelet-client-current.pem"); err != nil {
		t.Fatal(err)
	}
	var after syscall.Stat_t
	if err := syscall.Stat(path, &after); err != nil {
		t.Fatal(err)
	}
	if before.Ino == after.Ino {
		t.Error("the kubeconfig was written in place, not renamed over")
	}
	if b := make([]byte, 8); true {
		n, _ := old.Read(b)
		if string(b[:n]) != "old" {
			t.Errorf("the old file's reader read %q", b[:n])
		}
	}
	checkMode(t, path, 0o600)
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]; cl.Server != info.server || string(cl.CertificateAuthorityData) != "ca" {
		t.Errorf("cluster %+v", cl)
	}
	// A failed write (a directory where the file goes) leaves it and no
	// temporary file.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeKubeconfig(blocked, info, "/p.pem"); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	if st, err := os.Stat(filepath.Join(blocked, "x")); err != nil || !st.IsDir() {
		t.Errorf("the directory was touched: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestCertDirNarrowedTo0700: an existing cert dir open to others is
// narrowed.
func TestCertDirNarrowedTo0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureDir(dir); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700|os.ModeDir)
}

type fixedManager struct{ cert *tls.Certificate }

func (m fixedManager) Start()                     {}
func (m fixedManager) Stop()                      {}
func (m fixedManager) Current() *tls.Certificate  { return m.cert }
func (m fixedManager) ServerHealthy() bool        { return true }
func (m fixedManager) RotateCerts() (bool, error) { return false, nil }

// TestDeadlineWindow: on a fake clock, the renewal deadline of a
// certificate is within 70-90 % of its lifetime for any Rand, spread over
// the window, drawn once per certificate, and now for a certificate
// missing an address the template asks for.
func TestDeadlineWindow(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := testclock.NewFakeClock(start)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(1000 * time.Hour)}
	leaf.Subject = nodeSubject("n")
	rng := rand.New(rand.NewPCG(1, 2))
	var lo, hi time.Duration = 1 << 62, 0
	for range 2000 {
		r, err := newRotator(fixedManager{&tls.Certificate{Leaf: leaf}}, func() *x509.CertificateRequest { return ClientTemplate("n") },
			fc, rng.Float64, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := r.deadline(fc.Now()).Sub(start)
		if d < 700*time.Hour || d > 900*time.Hour {
			t.Fatalf("deadline at %v of 1000h", d)
		}
		if again := r.deadline(fc.Now()).Sub(start); again != d {
			t.Fatalf("deadline drawn again: %v then %v", d, again)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 705*time.Hour || hi < 895*time.Hour {
		t.Errorf("deadlines span only %v-%v of 700h-900h", lo, hi)
	}
	// The template wants an IP the certificate lacks: now.
	fc.Step(time.Hour)
	r, _ := newRotator(fixedManager{&tls.Certificate{Leaf: leaf}}, func() *x509.CertificateRequest {
		return ServingTemplate("n", []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}})
	}, fc, rng.Float64, nil, nil)
	if got := r.deadline(fc.Now()); !got.Equal(fc.Now()) {
		t.Errorf("deadline %v for a certificate lacking an address, want now %v", got, fc.Now())
	}
	// No certificate: now.
	r, _ = newRotator(fixedManager{}, func() *x509.CertificateRequest { return ClientTemplate("n") }, fc, rng.Float64, nil, nil)
	if got := r.deadline(fc.Now()); !got.Equal(fc.Now()) {
		t.Errorf("deadline %v without a certificate, want now", got)
	}
}

// tickingClock moves on at every reading, as a real clock does.
type tickingClock struct{ *testclock.FakeClock }

func (c tickingClock) Now() time.Time {
	c.FakeClock.Step(time.Microsecond)
	return c.FakeClock.Now()
}

type countingManager struct {
	fixedManager
	rotations *int
}

func (m countingManager) RotateCerts() (bool, error) {
	*m.rotations++
	return false, nil
}

// TestStepRenewsWhenDueOnAMovingClock: a certificate due now is renewed
// even though the clock moved between two readings (a step that compared
// two readings would never renew, and Run would spin).
func TestStepRenewsWhenDueOnAMovingClock(t *testing.T) {
	var n int
	clk := tickingClock{testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	r, err := newRotator(countingManager{rotations: &n}, func() *x509.CertificateRequest { return ClientTemplate("n") }, clk, rand.Float64, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.step()
	if n != 1 {
		t.Fatalf("%d renewals of a missing certificate, want 1", n)
	}
	if d := r.next(); d != RetryMin {
		t.Errorf("next try after a failure in %v, want %v", d, RetryMin)
	}
}
