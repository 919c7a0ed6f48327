package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The names of the self-signed serving pair in CertDir (the kubelet's).
const (
	SelfSignedCertFile = "kubelet.crt"
	SelfSignedKeyFile  = "kubelet.key"
)

// TLSConfig returns the API's TLS configuration: TLS 1.2 or later, the
// serving certificate of Config.GetCertificate, else the pair from
// TLSCertFile/TLSKeyFile or the self-signed one in
// CertDir (made on first use and kept), client certificates requested
// (verified by the authenticator, so a request without one can still
// bring a token).
func (s *Server) TLSConfig() (*tls.Config, error) {
	if s.cfg.GetCertificate != nil {
		return s.tlsConfig(nil), nil
	}
	certFile, keyFile := s.cfg.TLSCertFile, s.cfg.TLSKeyFile
	if certFile == "" {
		var err error
		if certFile, keyFile, err = EnsureSelfSignedPair(s.cfg.CertDir, s.cfg.NodeName, s.cfg.CertIPs, s.cfg.Clock.Now()); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: loading the serving pair: %w", err)
	}
	return s.tlsConfig(&pair), nil
}

// tlsConfig serves pair, or Config.GetCertificate's certificate when pair
// is nil.
func (s *Server) tlsConfig(pair *tls.Certificate) *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.cfg.GetCertificate,
		ClientAuth:     tls.RequestClientCert,
		ClientCAs:      s.cfg.ClientCA,
		NextProtos:     []string{"http/1.1"},
	}
	if pair != nil {
		c.Certificates = []tls.Certificate{*pair}
	}
	return c
}

// EnsureSelfSignedPair returns dir/kubelet.crt and dir/kubelet.key,
// making them first if either is missing: a CA and a serving certificate
// it signed (the chain in kubelet.crt), valid a year from now, for host,
// localhost, 127.0.0.1, ::1 and ips. The key is written mode 0600.
func EnsureSelfSignedPair(dir, host string, ips []net.IP, now time.Time) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, SelfSignedCertFile), filepath.Join(dir, SelfSignedKeyFile)
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	if errC == nil && errK == nil {
		return certFile, keyFile, nil
	}
	if (errC != nil && !errors.Is(errC, fs.ErrNotExist)) || (errK != nil && !errors.Is(errK, fs.ErrNotExist)) {
		return "", "", fmt.Errorf("server: serving pair: %w", errors.Join(errC, errK))
	}
	certPEM, keyPEM, err := selfSigned(host, ips, now)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("server: serving pair: %w", err)
	}
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("server: writing the serving key: %w", err)
	}
	if err := writeFileAtomic(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("server: writing the serving certificate: %w", err)
	}
	return certFile, keyFile, nil
}

func selfSigned(host string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{host, "localhost"},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
	}
	if net.ParseIP(host) != nil {
		leaf.DNSNames = []string{"localhost"}
		leaf.IPAddresses = append(leaf.IPAddresses, net.ParseIP(host))
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

// writeFileAtomic writes data to name through a synced temporary file
// renamed over it, so a crash leaves the old file or the new one.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
