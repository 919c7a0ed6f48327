package certificate

import (
	"errors"

	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"github.com/go-logr/logr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// testCA signs certificates as kube-controller-manager's signers would.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(1000 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{key: key, cert: cert}
}

// sign issues the certificate csr asks for, valid from now for lifetime.
func (ca *testCA) sign(csr *certificatesv1.CertificateSigningRequest, lifetime time.Duration) ([]byte, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil, fmt.Errorf("no PEM in the CSR")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, NotBefore: now, NotAfter: now.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature}
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageClientAuth:
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		case certificatesv1.UsageServerAuth:
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// What the fake signer does with a new CSR.
const (
	issue   = "issue"
	deny    = "deny"
	fail    = "fail"
	pending = "pending"
)

// fakeCluster is a fake clientset whose CSRs a test CA handles as told:
// every CSR created is recorded with its time.
type fakeCluster struct {
	*fake.Clientset
	ca       *testCA
	mu       sync.Mutex
	mode     string
	lifetime time.Duration
	created  []*certificatesv1.CertificateSigningRequest
	at       []time.Time
	// configs are the rest configs clients were made of (bearer tokens
	// and whether a client certificate was presented).
	configs []*rest.Config
}

var csrGVR = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

func newFakeCluster(t *testing.T, mode string, lifetime time.Duration) *fakeCluster {
	f := &fakeCluster{Clientset: fake.NewClientset(), ca: newTestCA(t), mode: mode, lifetime: lifetime}
	f.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		f.mu.Lock()
		defer f.mu.Unlock()
		if csr.Name == "" {
			csr.Name = fmt.Sprintf("%s%d", csr.GenerateName, len(f.created))
		}
		csr.UID = types.UID(fmt.Sprintf("uid-%d", len(f.created)))
		f.created = append(f.created, csr.DeepCopy())
		f.at = append(f.at, time.Now())
		switch f.mode {
		case issue:
			cert, err := f.ca.sign(csr, f.lifetime)
			if err != nil {
				return true, nil, err
			}
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved,
				Status: "True", Reason: "AutoApproved", LastUpdateTime: metav1.Now()}}
			csr.Status.Certificate = cert
		case deny:
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied,
				Status: "True", Reason: "NotAllowed", Message: "no such node"}}
		case fail:
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: "True", Reason: "AutoApproved"},
				{Type: certificatesv1.CertificateFailed, Status: "True", Reason: "SignerError", Message: "the CA is gone"}}
		}
		return false, nil, nil // the tracker stores it as changed here
	})
	// The tracker ignores field selectors: keep each list and watch to the
	// CSR named, as the API server does.
	named := func(fs fields.Selector, name string) bool { return fs.Matches(fields.Set{"metadata.name": name}) }
	f.PrependReactor("list", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		fs := a.(k8stesting.ListAction).GetListRestrictions().Fields
		objs, err := f.Tracker().List(csrGVR, certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "")
		if err != nil {
			return true, nil, err
		}
		list := objs.(*certificatesv1.CertificateSigningRequestList)
		list.Items = slices.DeleteFunc(list.Items, func(c certificatesv1.CertificateSigningRequest) bool { return !named(fs, c.Name) })
		return true, list, nil
	})
	f.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		fs := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		w, err := f.Tracker().Watch(csrGVR, "")
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			c, ok := e.Object.(*certificatesv1.CertificateSigningRequest)
			return e, ok && named(fs, c.Name)
		}), nil
	})
	return f
}

func (f *fakeCluster) newClientset(c *rest.Config) (kubernetes.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configs = append(f.configs, rest.CopyConfig(c))
	return f, nil
}

func (f *fakeCluster) csrs() ([]*certificatesv1.CertificateSigningRequest, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created), slices.Clone(f.at)
}

func (f *fakeCluster) setMode(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
}

// writeBootstrapKubeconfig writes a bootstrap kubeconfig with a token.
func writeBootstrapKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "bootstrap.kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: abcdef.0123456789abcdef
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// syncErrorBackoff brings a synctest bubble's clock past apimachinery's
// error back-off: its package-level last-error time is real time (or a
// former bubble's), and the first HandleError in a bubble whose clock is
// behind it would sleep until then. One handled error at the bubble's
// start makes that jump before any certificate is made.
func syncErrorBackoff(t *testing.T) {
	ctx := logr.NewContext(t.Context(), logr.Discard())
	utilruntime.HandleErrorWithContext(ctx, errors.New("test: sync the error back-off"), "")
	utilruntime.HandleErrorWithContext(ctx, errors.New("test: sync the error back-off"), "")
}

// advance lets d of virtual time pass in a synctest bubble.
func advance(d time.Duration) { <-time.After(d) }
