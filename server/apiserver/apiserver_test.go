package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/server"
)

type pods []*v1.Pod

func (p pods) Pods() []*v1.Pod { return p }

// fakeAPIServer answers TokenReview for the tokens "admin-token" and
// "node-token" and SubjectAccessReview allowing the user "admin"
// everything on node1 and "system:node:node1" nothing; it counts both.
func fakeAPIServer(t *testing.T) (kubernetes.Interface, *atomic.Int32, *atomic.Int32) {
	var reviews, sars atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		switch tr.Spec.Token {
		case "admin-token":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}}
		case "node-token":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:node:node1", Groups: []string{"system:nodes"}}}
		default:
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid token"}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		sars.Add(1)
		var sar authzv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra != nil && ra.Resource == "nodes" && ra.Name == "node1" && ra.Version == "v1" && sar.Spec.User == "admin"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sar)
	})
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, &reviews, &sars
}

// TestTokenAndSubjectAccessReviewThroughTheServer: without credentials
// 401, the node's own token 403, the admin 200; TokenReview and
// SubjectAccessReview answers are cached.
func TestTokenAndSubjectAccessReviewThroughTheServer(t *testing.T) {
	client, reviews, sars := fakeAPIServer(t)
	auth, err := New(Config{Client: client, TokenWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{NodeName: "node1", Pods: pods{}, Authenticator: auth.Authenticator,
		Authorizer: auth.Authorizer, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		r := httptest.NewRequest("GET", "/pods", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		token string
		code  int
	}{{"", 401}, {"wrong", 401}, {"node-token", 403}, {"admin-token", 200}, {"admin-token", 200}, {"node-token", 403}} {
		if got := get(c.token); got != c.code {
			t.Errorf("token %q: %d, want %d", c.token, got, c.code)
		}
	}
	// One review per distinct token, the rest from the cache; one SAR per
	// (user, subresource) checked: node pods+proxy, admin pods.
	if reviews.Load() != 3 || sars.Load() != 3 {
		t.Errorf("TokenReviews %d (want 3), SubjectAccessReviews %d (want 3)", reviews.Load(), sars.Load())
	}
}

func TestConfigErrors(t *testing.T) {
	client, _, _ := fakeAPIServer(t)
	for name, cfg := range map[string]Config{
		"token webhook without Client": {TokenWebhook: true, AuthorizationMode: ModeAlwaysAllow},
		"Webhook without Client":       {},
		"unknown mode":                 {Client: client, AuthorizationMode: "RBAC"},
		"missing CA file":              {Client: client, ClientCAFile: "/nonexistent/ca.crt"},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a, err := New(Config{AuthorizationMode: ModeAlwaysAllow})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Authorizer.(server.AlwaysAllow); !ok || a.Authenticator != nil {
		t.Errorf("AlwaysAllow mode without authentication gave %T, %v", a.Authorizer, a.Authenticator)
	}
}

// TestClientCertificateFromCAFile: a client certificate signed by the CA
// file authenticates as its CN and O (plus system:authenticated); one from
// another CA is an error.
func TestClientCertificateFromCAFile(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	leafDER, _ := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	leaf, _ := x509.ParseCertificate(leafDER)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.CreateCertificate(rand.Reader, leafTmpl, leafTmpl, &otherKey.PublicKey, otherKey)
	other, _ := x509.ParseCertificate(otherDER) // self-signed: not from the CA

	auth, err := New(Config{ClientCAFile: caFile, AuthorizationMode: ModeAlwaysAllow})
	if err != nil {
		t.Fatal(err)
	}
	if auth.ClientCA == nil {
		t.Fatal("no ClientCA pool")
	}
	r := httptest.NewRequest("GET", "/pods", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	u, ok, err := auth.Authenticator.Authenticate(r)
	if err != nil || !ok || u.Name != "kube-apiserver-kubelet-client" {
		t.Fatalf("client cert: %+v %v %v", u, ok, err)
	}
	if len(u.Groups) != 2 || u.Groups[0] != "system:masters" || u.Groups[1] != "system:authenticated" {
		t.Errorf("groups %v", u.Groups)
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{other}}
	if _, ok, err := auth.Authenticator.Authenticate(r); ok || err == nil {
		t.Errorf("a certificate from another CA: ok %v err %v", ok, err)
	}
	r = httptest.NewRequest("GET", "/pods", nil)
	if _, ok, err := auth.Authenticator.Authenticate(r); ok || err != nil {
		t.Errorf("no credentials: ok %v err %v", ok, err)
	}
}
