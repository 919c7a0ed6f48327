package certificate_test

import (
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/clusterapiserver/certificate"
)

// What a node asks for: its client certificate's subject and usages, and
// the names its serving certificate is for.
func Example() {
	client := certificate.ClientTemplate("node-1")
	fmt.Println(client.Subject.CommonName, client.Subject.Organization)
	fmt.Println(certificate.ClientSignerName, certificate.ClientUsages(nil))
	serving := certificate.ServingTemplate("node-1", []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "node-1"}, {Type: v1.NodeInternalIP, Address: "10.0.0.5"}})
	fmt.Println(certificate.ServingSignerName, serving.DNSNames, serving.IPAddresses)

	_, err := certificate.NewClient(certificate.ClientConfig{CertDir: filepath.Join("var", "pki")})
	fmt.Println(errors.Is(err, certificate.ErrInvalidConfig), err)
	// Output:
	// system:node:node-1 [system:nodes]
	// kubernetes.io/kube-apiserver-client-kubelet [digital signature client auth]
	// kubernetes.io/kubelet-serving [node-1] [10.0.0.5]
	// true certificate: invalid config: NodeName is required
}
