package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/server/healthz"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

func (ca *testCA) client(t *testing.T, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestSelfSignedPairKeptInCertDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	certFile, keyFile, err := EnsureSelfSignedPair(dir, "node1", []net.IP{net.ParseIP("10.0.0.5")}, now)
	if err != nil {
		t.Fatal(err)
	}
	if certFile != filepath.Join(dir, "kubelet.crt") || keyFile != filepath.Join(dir, "kubelet.key") {
		t.Errorf("files %s %s", certFile, keyFile)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v %v", fi.Mode(), err)
	}
	first, _ := os.ReadFile(certFile)
	// Kept: a second start reuses the pair.
	if _, _, err := EnsureSelfSignedPair(dir, "node1", nil, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(certFile)
	if !bytes.Equal(first, second) {
		t.Error("the pair was made again")
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	ca, _ := x509.ParseCertificate(pair.Certificate[1])
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, host := range []string{"node1", "localhost", "127.0.0.1", "10.0.0.5"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other", CurrentTime: now}); err == nil {
		t.Error("verified for another host")
	}
}

// TestServeTLSWithClientCertificates runs Serve over TLS with the x509
// authenticator: a certificate of the client CA is the user (CN, O),
// another CA's is refused 401, none is 401; TLS 1.1 does not connect.
func TestServeTLSWithClientCertificates(t *testing.T) {
	ca, other := newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	f := newFixture(t, func(c *Config) { c.Authenticator = nil; c.ClientCA = ca.pool })
	f.authz.grants["kube-apiserver/*"] = true
	tlsCfg, err := f.srv.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("min version %x", tlsCfg.MinVersion)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hz, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, tls.NewListener(ln, tlsCfg), hz) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	// The served chain ends in its own CA: trust that CA.
	pair, _ := tls.LoadX509KeyPair(filepath.Join(f.srv.cfg.CertDir, SelfSignedCertFile), filepath.Join(f.srv.cfg.CertDir, SelfSignedKeyFile))
	servingCA, _ := x509.ParseCertificate(pair.Certificate[1])
	roots := x509.NewCertPool()
	roots.AddCert(servingCA)
	get := func(cert *tls.Certificate, maxVersion uint16) (int, string, error) {
		tc := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MaxVersion: maxVersion}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		defer cl.CloseIdleConnections()
		resp, err := cl.Get("https://" + ln.Addr().String() + "/pods")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	good := ca.client(t, "kube-apiserver", "system:masters")
	if code, body, err := get(&good, 0); err != nil || code != http.StatusOK {
		t.Errorf("client cert: %d %q %v", code, body, err)
	}
	last := f.authz.seen[len(f.authz.seen)-1]
	if last.User.Name != "kube-apiserver" || len(last.User.Groups) != 2 || last.User.Groups[0] != "system:masters" || last.User.Groups[1] != AuthenticatedGroup {
		t.Errorf("user %+v", last.User)
	}
	bad := other.client(t, "kube-apiserver")
	if code, _, err := get(&bad, 0); err != nil || code != http.StatusUnauthorized {
		t.Errorf("other CA: %d %v", code, err)
	}
	if code, _, err := get(nil, 0); err != nil || code != http.StatusUnauthorized {
		t.Errorf("no cert: %d %v", code, err)
	}
	if _, _, err := get(&good, tls.VersionTLS11); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("TLS 1.1: %v", err)
	}
	// The health port: plain HTTP, /healthz only.
	resp, err := http.Get("http://" + hz.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("healthz port: %d %q", resp.StatusCode, b)
	}
}

// TestRunWithBusyHealthPort: the API serves while the health port is
// taken; the health port is tried again after HealthzRetry and then
// serves; Run returns nil when ctx ends.
func TestRunWithBusyHealthPort(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hzPort := busy.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	f := newFixture(t, func(c *Config) {
		c.Address, c.Port, c.HealthzPort, c.Clock = "127.0.0.1", port, hzPort, clk
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(ctx) }()
	// The health port failed: its retry timer waits.
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("no retry after the busy health port")
		}
		runtime.Gosched()
	}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest("GET", "https://127.0.0.1:"+strconv.Itoa(port)+"/pods", nil)
	req.Header.Set("X-User", "admin")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("API while the health port is busy: %d", resp.StatusCode)
	}
	busy.Close()
	clk.Step(healthz.Retry)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(hzPort) + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("healthz %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health port never came up: %v", err)
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := f.srv.Run(t.Context()); err == nil {
		t.Fatal("a second Run did not fail")
	}
}

// TestTLSGetCertificate: with Config.GetCertificate every handshake gets
// the certificate it returns at that moment (a renewed one from the next
// connection on), and no self-signed pair is made.
func TestTLSGetCertificate(t *testing.T) {
	ca := newTestCA(t, "serving-ca")
	var mu sync.Mutex
	current := ca.client(t, "system:node:first")
	f := newFixture(t, func(c *Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			mu.Lock()
			defer mu.Unlock()
			cert := current
			return &cert, nil
		}
	})
	tlsCfg, err := f.srv.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(tlsCfg.Certificates) != 0 || tlsCfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("certificates %d, min version %x", len(tlsCfg.Certificates), tlsCfg.MinVersion)
	}
	if _, err := os.Stat(filepath.Join(f.srv.cfg.CertDir, SelfSignedCertFile)); !os.IsNotExist(err) {
		t.Errorf("a self-signed pair was made: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := func() string {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = tls.Server(c, tlsCfg).Handshake()
		}()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			conn.Close()
			<-done
		}()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "system:node:first" {
		t.Errorf("served %q", got)
	}
	mu.Lock()
	current = ca.client(t, "system:node:renewed")
	mu.Unlock()
	if got := served(); got != "system:node:renewed" {
		t.Errorf("after the renewal served %q", got)
	}
	if _, err := New(Config{NodeName: "n", Pods: f.srv.cfg.Pods, Authorizer: f.srv.cfg.Authorizer, TLSCertFile: "a", TLSKeyFile: "b",
		GetCertificate: f.srv.cfg.GetCertificate}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("GetCertificate with TLSCertFile: %v", err)
	}
}
