// Package excerts holds the kubelet's certificate flags of the cluster
// examples (--bootstrap-kubeconfig, --cert-dir, --rotate-certificates,
// --rotate-server-certificates) and wires clusterapiserver/certificate
// with them.
package excerts

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"net"
	"path/filepath"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver/certificate"
	"github.com/nodekit/nodekit/nodestatus"
)

// Flags are the kubelet's certificate flags.
type Flags struct {
	BootstrapKubeconfig string
	CertDir             string
	Rotate              bool
	RotateServer        bool
}

// Register adds the flags to fs (the kubelet's names; off by default).
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.BootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig of a bootstrap credential (e.g. a bootstrap token): when --kubeconfig holds no valid client certificate, ask for one with a CSR, wait until it is issued and write --kubeconfig (default <cert-dir>/kubelet.kubeconfig) pointing at it")
	fs.StringVar(&f.CertDir, "cert-dir", "", "directory of the node's certificates and keys (mode 0700); default <root>/pki")
	fs.BoolVar(&f.Rotate, "rotate-certificates", false, "renew the client certificate with a CSR at 70-90 % of its lifetime (and through the bootstrap credential when it expired)")
	fs.BoolVar(&f.RotateServer, "rotate-server-certificates", false, "get the HTTPS API's serving certificate through kubernetes.io/kubelet-serving CSRs for the node's addresses and renew it (default: a self-signed pair)")
}

// Enabled reports whether the client credential comes from this package
// (a bootstrap kubeconfig or rotation) rather than from --kubeconfig alone.
func (f *Flags) Enabled() bool { return f.BootstrapKubeconfig != "" || f.Rotate }

// Check refuses what the TLS bootstrap cannot work with: no node name (the
// CSR is for system:node:<name>), or a credential given by --server and
// --token (serverOrToken) instead of the --kubeconfig it writes.
func (f *Flags) Check(nodeName string, serverOrToken bool) error {
	if nodeName == "" {
		return errors.New("--node-name is required")
	}
	if serverOrToken {
		return errors.New("--bootstrap-kubeconfig and --rotate-certificates take --kubeconfig, not --server/--token")
	}
	return nil
}

// Dir is --cert-dir, or <root>/pki.
func (f *Flags) Dir(root string) (string, error) {
	if f.CertDir != "" {
		return filepath.Abs(f.CertDir)
	}
	if root == "" {
		return "", errors.New("--cert-dir (or --root) is required with --bootstrap-kubeconfig, --rotate-certificates or --rotate-server-certificates")
	}
	return filepath.Join(root, "pki"), nil
}

// Client runs the TLS bootstrap (waiting until the CSR is issued when
// there is no valid certificate) and returns the node's rest config and
// the certificate.Client whose Run renews it (with --rotate-certificates).
func (f *Flags) Client(ctx context.Context, kubeconfig, nodeName, root string, log *zap.Logger) (*rest.Config, *certificate.Client, error) {
	dir, err := f.Dir(root)
	if err != nil {
		return nil, nil, err
	}
	cc, err := certificate.NewClient(certificate.ClientConfig{NodeName: nodeName, CertDir: dir, Kubeconfig: kubeconfig,
		BootstrapKubeconfig: f.BootstrapKubeconfig, Rotate: f.Rotate, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	cfg, err := cc.Bootstrap(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cfg, cc, nil
}

// Serving, with --rotate-server-certificates, adds the serving certificate
// to b as a part and returns its GetCertificate for the HTTPS API; nil
// without the flag. The certificate is for the node's addresses (nodeIPs,
// else the host's, and the node name).
func (f *Flags) Serving(b *nodekit.Builder, client kubernetes.Interface, nodeName, root string, nodeIPs []net.IP, log *zap.Logger) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if !f.RotateServer {
		return nil, nil
	}
	dir, err := f.Dir(root)
	if err != nil {
		return nil, err
	}
	addrCfg := nodestatus.AddressConfig{NodeIPs: nodeIPs, AllowLoopback: true}
	s, err := certificate.NewServing(certificate.ServingConfig{NodeName: nodeName, Client: client, CertDir: dir, Logger: log,
		Addresses: func() []v1.NodeAddress {
			addrs, err := nodestatus.StaticAddresses(addrCfg, nodeName)
			if err != nil {
				return nil
			}
			return addrs
		}})
	if err != nil {
		return nil, err
	}
	b.WithPart("serving certificate", s.Run)
	return s.GetCertificate, nil
}
