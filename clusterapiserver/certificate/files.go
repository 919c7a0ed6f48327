package certificate

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// File modes of the certificate directory and of the files in it that hold
// a private key (the kubeconfig points at one, so it gets the same mode).
const (
	DirMode = 0o700
	KeyMode = 0o600
)

// ensureDir makes dir (and its parents) and narrows dir itself to DirMode:
// the pairs in it hold private keys.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("certificate: cert dir: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("certificate: cert dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("certificate: cert dir %s is not a directory", dir)
	}
	if st.Mode().Perm() != DirMode {
		if err := os.Chmod(dir, DirMode); err != nil {
			return fmt.Errorf("certificate: cert dir: %w", err)
		}
	}
	return nil
}

// writeFileAtomic writes data to name through a synced temporary file in
// the same directory renamed over it, then syncs the directory: a crash
// leaves the old file or the new one, never a part.
func writeFileAtomic(name string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
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
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// loadOrGenerateKey returns the private key kept in path (PEM) or, when
// there is none or it does not parse, a new ECDSA P-256 key written there
// (KeyMode) first, so that a restart while the CSR waits reuses it.
func loadOrGenerateKey(path string) (keyPEM []byte, key crypto.Signer, err error) {
	if data, err := os.ReadFile(path); err == nil {
		if k, err := keyutil.ParsePrivateKeyPEM(data); err == nil {
			if s, ok := k.(crypto.Signer); ok {
				return data, s, nil
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("certificate: reading the pending key: %w", err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: generating a key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(ec)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: encoding the key: %w", err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der})
	if err := writeFileAtomic(path, keyPEM, KeyMode); err != nil {
		return nil, nil, fmt.Errorf("certificate: writing the pending key: %w", err)
	}
	return keyPEM, ec, nil
}

// clusterInfo is what a written kubeconfig keeps of the bootstrap one.
type clusterInfo struct {
	server   string
	caFile   string
	caData   []byte
	insecure bool
	tlsName  string
}

// writeKubeconfig writes, atomically and KeyMode, a kubeconfig for the
// cluster whose user is the certificate and key pair in pemPath (both in
// one file, as the certificate store keeps them).
func writeKubeconfig(path string, c clusterInfo, pemPath string) error {
	cluster := &clientcmdapi.Cluster{Server: c.server, InsecureSkipTLSVerify: c.insecure, TLSServerName: c.tlsName}
	if c.caFile != "" {
		cluster.CertificateAuthority = c.caFile
	} else {
		cluster.CertificateAuthorityData = c.caData
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return fmt.Errorf("certificate: encoding the kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return fmt.Errorf("certificate: kubeconfig: %w", err)
	}
	if err := writeFileAtomic(path, data, KeyMode); err != nil {
		return fmt.Errorf("certificate: writing the kubeconfig: %w", err)
	}
	return nil
}
