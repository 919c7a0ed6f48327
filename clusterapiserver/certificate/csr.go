package certificate

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	cgcert "k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
)

// The signers of the node's certificates (certificates.k8s.io/v1).
const (
	ClientSignerName  = certificatesv1.KubeAPIServerClientKubeletSignerName // kubernetes.io/kube-apiserver-client-kubelet
	ServingSignerName = certificatesv1.KubeletServingSignerName             // kubernetes.io/kubelet-serving
)

// The certificate store's pair names in the cert dir, as the kubelet's:
// <name>-current.pem is a symbolic link to the dated <name>-<time>.pem
// holding the certificate (chain) and its key.
const (
	ClientPairName  = "kubelet-client"
	ServingPairName = "kubelet-server"
)

// nodeSubject is the subject of both node certificates.
func nodeSubject(nodeName string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
}

// ClientTemplate is the certificate request of the node's client
// certificate: CN system:node:<name>, O system:nodes.
func ClientTemplate(nodeName string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: nodeSubject(nodeName)}
}

// ClientUsages are the key usages asked for a client certificate with key
// (digital signature and client auth; key encipherment too for an RSA key),
// as the kubelet asks.
func ClientUsages(key any) []certificatesv1.KeyUsage {
	return cgcert.DefaultKubeletClientGetUsages(key)
}

// ServingUsages are those of a serving certificate (digital signature and
// server auth; key encipherment too for an RSA key).
func ServingUsages(key any) []certificatesv1.KeyUsage {
	return cgcert.DefaultKubeletServingGetUsages(key)
}

// ServingTemplate is the certificate request of the node's serving
// certificate: the node subject and, as subject alternative names, the
// addresses' host names and IPs (sorted, without repeats). Nil when there
// is no IP address: as the kubelet, no serving certificate is asked for a
// node without one.
func ServingTemplate(nodeName string, addresses []v1.NodeAddress) *x509.CertificateRequest {
	var names, ips []string
	for _, a := range addresses {
		if a.Address == "" {
			continue
		}
		ip := net.ParseIP(a.Address)
		switch a.Type {
		case v1.NodeHostName:
			if ip != nil {
				ips = append(ips, ip.String())
			} else {
				names = append(names, a.Address)
			}
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip != nil {
				ips = append(ips, ip.String())
			}
		case v1.NodeInternalDNS, v1.NodeExternalDNS:
			names = append(names, a.Address)
		}
	}
	if len(ips) == 0 {
		return nil
	}
	slices.Sort(names)
	slices.Sort(ips)
	t := &x509.CertificateRequest{Subject: nodeSubject(nodeName), DNSNames: slices.Compact(names)}
	for _, s := range slices.Compact(ips) {
		t.IPAddresses = append(t.IPAddresses, net.ParseIP(s))
	}
	return t
}

// csrName names a node's CSR after what it asks for (public key, subject,
// usages), so that an agent restarted while its request waits finds that
// request again instead of making a second one.
func csrName(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("certificate: encoding the public key: %w", err)
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(der)
	field([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		field([]byte(o))
	}
	for _, u := range usages {
		field([]byte(u))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// request submits a CSR for key with template to signer and waits (a
// watch, through client-go's csr helpers) until it is issued, denied or
// failed, or ctx ends. The issued certificate must go with key.
func request(ctx context.Context, client kubernetes.Interface, key crypto.Signer, keyPEM []byte, template *x509.CertificateRequest,
	signer string, usages []certificatesv1.KeyUsage, lifetime *time.Duration) (certPEM []byte, err error) {
	csrPEM, err := certutil.MakeCSRFromTemplate(key, template)
	if err != nil {
		return nil, fmt.Errorf("certificate: making the CSR: %w", err)
	}
	name, err := csrName(key.Public(), template.Subject, usages)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name, signer, lifetime, usages, key)
	if err != nil {
		return nil, fmt.Errorf("certificate: submitting CSR %s: %w", name, err)
	}
	certPEM, err = csr.WaitForCertificate(ctx, client, reqName, reqUID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("certificate: waiting for CSR %s: %w", reqName, context.Cause(ctx))
		}
		return nil, classify(ctx, client, reqName, err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("certificate: CSR %s: the issued certificate does not go with the key: %w", reqName, err)
	}
	return certPEM, nil
}

// classify turns a failed wait into ErrDenied or ErrFailed when the CSR
// says so.
func classify(ctx context.Context, client kubernetes.Interface, name string, waitErr error) error {
	obj, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		for _, c := range obj.Status.Conditions {
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return fmt.Errorf("%w: CSR %s: reason %q, message %q", ErrDenied, name, c.Reason, c.Message)
			case certificatesv1.CertificateFailed:
				return fmt.Errorf("%w: CSR %s: reason %q, message %q", ErrFailed, name, c.Reason, c.Message)
			}
		}
	}
	return fmt.Errorf("certificate: waiting for CSR %s: %w", name, waitErr)
}
