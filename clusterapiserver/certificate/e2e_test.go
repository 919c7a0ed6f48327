//go:build e2e

package certificate_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/keyutil"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/clusterapiserver/certificate"
)

// e2eSigner approves and signs the node's client CSRs as
// kube-controller-manager's csrapprover and kube-apiserver-client-kubelet
// signer would, with the API server's client CA.
type e2eSigner struct {
	admin    kubernetes.Interface
	caCert   *x509.Certificate
	caKey    crypto.Signer
	node     string
	lifetime time.Duration

	mu     sync.Mutex
	signed []signedCSR
}

type signedCSR struct {
	name, signer, username string
	notAfter               time.Time
}

func newE2ESigner(t *testing.T, admin kubernetes.Interface, node string, lifetime time.Duration) *e2eSigner {
	certPEM, err := os.ReadFile(os.Getenv("NODEKIT_NODE_CLIENT_CA"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(os.Getenv("NODEKIT_NODE_CLIENT_CA_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	return &e2eSigner{admin: admin, caCert: caCert, caKey: key.(crypto.Signer), node: node, lifetime: lifetime}
}

// list is the signed CSRs of signer.
func (s *e2eSigner) list(signer string) []signedCSR {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []signedCSR
	for _, c := range s.signed {
		if c.signer == signer {
			out = append(out, c)
		}
	}
	return out
}

// run handles the node's pending CSRs until ctx ends.
func (s *e2eSigner) run(ctx context.Context, t *testing.T) {
	done := map[string]bool{}
	for ctx.Err() == nil {
		list, err := s.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				csr := &list.Items[i]
				if done[csr.Name] || (csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName &&
					csr.Spec.SignerName != certificatesv1.KubeletServingSignerName) {
					continue
				}
				if err := s.approveAndSign(ctx, csr); err != nil {
					if ctx.Err() == nil {
						t.Errorf("signing CSR %s: %v", csr.Name, err)
					}
					continue
				}
				done[csr.Name] = true
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *e2eSigner) approveAndSign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return fmt.Errorf("no PEM request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	if err := req.CheckSignature(); err != nil {
		return err
	}
	if req.Subject.CommonName != "system:node:"+s.node {
		return nil // another test's node
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "NodekitE2EApprove", Message: "approved by the e2e test"})
	approved, err := s.admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	now := time.Now()
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: req.Subject, NotBefore: now.Add(-time.Second), NotAfter: now.Add(s.lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
		// The kubelet-serving signer: server auth, the request's names.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames, tmpl.IPAddresses = req.DNSNames, req.IPAddresses
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, req.PublicKey, s.caKey)
	if err != nil {
		return err
	}
	approved.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := s.admin.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, approved, metav1.UpdateOptions{}); err != nil {
		return err
	}
	s.mu.Lock()
	s.signed = append(s.signed, signedCSR{name: csr.Name, signer: csr.Spec.SignerName, username: csr.Spec.Username, notAfter: tmpl.NotAfter})
	s.mu.Unlock()
	return nil
}

// waitUntil checks cond every 250ms until it holds, or fails the test
// after one last check once timeout has passed.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	expired := false
	for {
		ok, state := cond()
		if ok {
			return
		}
		if expired {
			t.Fatalf("%s: not within %v (%s)", what, timeout, state)
		}
		select {
		case <-deadline.C:
			expired = true
		case <-tick.C:
		}
	}
}

// TestTLSBootstrapAndRotation: an agent with only a bootstrap kubeconfig
// (a bootstrap token) asks for its client certificate; the test approves
// and signs it as kube-controller-manager would (40 s lifetime); the node
// registers with that identity through the Node authorizer and renews its
// lease; the certificate is rotated (a second CSR, asked as the node) and
// the lease keeps being renewed after the first certificate expired.
func TestTLSBootstrapAndRotation(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" || os.Getenv("NODEKIT_BOOTSTRAP_KUBECONFIG") == "" {
		t.Skip("no API server with bootstrap tokens (hack/kube-apiserver.sh start; NODEKIT_BOOTSTRAP_KUBECONFIG)")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	adminCfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("NODEKIT_ADMIN_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	// The admin client's own connections (not client-go's shared
	// transport), all closed at the end: goleak sees none left.
	adminDialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second}).DialContext)
	adminCfg.Dial = adminDialer.DialContext
	defer adminDialer.CloseAll()
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	node := "nodekit-certs-" + hex.EncodeToString(suffix)
	const lifetime = 40 * time.Second
	signer := newE2ESigner(t, admin, node, lifetime)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	signerCtx, stopSigner := context.WithCancel(ctx)
	signerDone := make(chan struct{})
	go func() {
		defer close(signerDone)
		signer.run(signerCtx, t)
	}()
	defer func() {
		stopSigner()
		<-signerDone
	}()
	defer func() {
		_ = admin.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), node, metav1.DeleteOptions{})
	}()

	dir := t.TempDir()
	cc, err := certificate.NewClient(certificate.ClientConfig{NodeName: node, CertDir: filepath.Join(dir, "pki"),
		BootstrapKubeconfig: os.Getenv("NODEKIT_BOOTSTRAP_KUBECONFIG"), Rotate: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bctx, bcancel := context.WithTimeout(ctx, 60*time.Second)
	restCfg, err := cc.Bootstrap(bctx)
	bcancel()
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseConnections()
	t.Logf("bootstrapped in %v", time.Since(start).Round(time.Millisecond))
	// The signer records a CSR just after the API server has it signed.
	waitUntil(t, 5*time.Second, "the first CSR recorded", func() (bool, string) {
		return len(signer.list(certificatesv1.KubeAPIServerClientKubeletSignerName)) > 0, "none"
	})
	signed := signer.list(certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(signed) != 1 || !strings.HasPrefix(signed[0].username, "system:bootstrap:") {
		t.Fatalf("first CSR %+v: want one, asked by a system:bootstrap:<token id> user", signed)
	}
	first := signed[0]
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	whoami := func() (string, []string, error) {
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", nil, err
		}
		return r.Status.UserInfo.Username, r.Status.UserInfo.Groups, nil
	}
	if user, groups, err := whoami(); err != nil || user != "system:node:"+node || !strings.Contains(strings.Join(groups, ","), "system:nodes") {
		t.Fatalf("the issued identity: %q %v %v", user, groups, err)
	}

	// The serving certificate through kubelet-serving CSRs, asked as the
	// node, for its address.
	serving, err := certificate.NewServing(certificate.ServingConfig{NodeName: node, Client: client, CertDir: filepath.Join(dir, "pki"),
		Addresses: func() []corev1.NodeAddress {
			return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: node}}
		}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := clusterapiserver.Wire(nodekit.NewBuilder().WithFakeRuntime().WithRootDir(filepath.Join(dir, "root")).
		WithPart("client certificate", cc.Run).WithPart("serving certificate", serving.Run),
		clusterapiserver.Config{Client: client, NodeName: node, NodeIPs: []net.IP{net.ParseIP("127.0.0.1")}, AllowLoopbackNodeIP: true,
			NoEvents: true, Logger: zaptest.NewLogger(t)}).Build()
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	go agent.Run(actx) //nolint:errcheck // read from agent.Err
	defer func() {
		stopAgent()
		<-agent.Done()
		if err := agent.Err(); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	// Registered through the Node authorizer and NodeRestriction, lease
	// renewed.
	waitUntil(t, 30*time.Second, "the Node and its Lease", func() (bool, string) {
		if _, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil, "no renew time"
	})
	waitUntil(t, 30*time.Second, "the serving certificate", func() (bool, string) {
		cert, err := serving.GetCertificate(nil)
		if err != nil {
			return false, err.Error()
		}
		ok := len(cert.Leaf.IPAddresses) == 1 && cert.Leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) &&
			len(cert.Leaf.DNSNames) == 1 && cert.Leaf.DNSNames[0] == node && cert.Leaf.CheckSignatureFrom(signer.caCert) == nil
		return ok, fmt.Sprintf("%v %v", cert.Leaf.DNSNames, cert.Leaf.IPAddresses)
	})
	if s := signer.list(certificatesv1.KubeletServingSignerName); len(s) == 0 || s[0].username != "system:node:"+node {
		t.Errorf("serving CSRs %+v: want one asked by the node", s)
	}
	// Rotated: a second CSR, asked by the node itself.
	waitUntil(t, lifetime, "the rotation CSR", func() (bool, string) {
		s := signer.list(certificatesv1.KubeAPIServerClientKubeletSignerName)
		return len(s) >= 2, fmt.Sprintf("%d signed", len(s))
	})
	second := signer.list(certificatesv1.KubeAPIServerClientKubeletSignerName)[1]
	if second.username != "system:node:"+node {
		t.Errorf("the rotation CSR was asked by %q, want the node", second.username)
	}
	waitUntil(t, 10*time.Second, "the new certificate in use", func() (bool, string) {
		cur := cc.Current()
		return cur != nil && cur.Leaf.NotAfter.Equal(second.notAfter.Truncate(time.Second)), "old certificate"
	})
	// The lease keeps being renewed after the first certificate expired:
	// the connections use the new one.
	waitUntil(t, 30*time.Second, "a lease renewal after the first certificate expired", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rt := l.Spec.RenewTime.Time
		return rt.After(first.notAfter.Add(time.Second)), fmt.Sprintf("renewed at %v, first certificate expired at %v", rt, first.notAfter)
	})
	if user, _, err := whoami(); err != nil || user != "system:node:"+node {
		t.Errorf("after the rotation: %q %v", user, err)
	}
	if err := agent.Err(); err != nil {
		t.Errorf("agent: %v", err)
	}
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}
