// Package certificate gives a node agent its credentials as the kubelet's
// pkg/kubelet/certificate does, on client-go's util/certificate (its file
// store, its certificate manager's CSR step and its csr helpers):
//
//   - TLS bootstrap (Client.Bootstrap): with a bootstrap kubeconfig (a
//     bootstrap token in system:bootstrappers) and no client certificate
//     that has not expired, an ECDSA P-256 key, a certificates.k8s.io/v1
//     CSR for signer kubernetes.io/kube-apiserver-client-kubelet (CN
//     system:node:<name>, O system:nodes, usages digital signature and
//     client auth), a watch until it is issued (ErrDenied, ErrFailed, or
//     ctx's error), then the pair in the cert dir as the kubelet keeps it
//     (kubelet-client-<time>.pem and the link kubelet-client-current.pem)
//     and a kubeconfig pointing at it, written atomically.
//   - Client certificate rotation (ClientConfig.Rotate, Client.Run): a new
//     key and CSR at a random 70-90 % of the certificate's lifetime (at
//     once when it expired, then through the bootstrap credential), retried
//     after 2, 4, ... 32 s; the rest config Bootstrap returns presents the
//     current certificate and its connections are all closed when it
//     changes (client-go's connrotation dialer, as the kubelet's
//     transport), so no connection keeps the old certificate.
//   - The serving certificate (Serving): kubernetes.io/kubelet-serving
//     CSRs for the node's addresses (the kubelet's serverTLSBootstrap and
//     --rotate-server-certificates), renewed the same way and when an
//     address is added; Serving.GetCertificate goes into the node API's
//     TLS configuration (server.Config.GetCertificate).
//
// Private keys are written 0600 in a directory made (or narrowed to) 0700;
// the kubeconfig is 0600 too and names the pair's file, never its bytes.
// Nothing of a key is logged. client-go's own log lines go to the Logger.
//
// A program runs the bootstrap first, then the rotation beside its agent:
//
//	cc, err := certificate.NewClient(certificate.ClientConfig{NodeName: name, CertDir: dir,
//		BootstrapKubeconfig: "/etc/nodekit/bootstrap.kubeconfig", Rotate: true})
//	restCfg, err := cc.Bootstrap(ctx) // waits until the CSR is issued
//	client, err := kubernetes.NewForConfig(restCfg)
//	b.WithPart("client certificate", cc.Run)
//	clusterapiserver.Wire(b, clusterapiserver.Config{Client: client, NodeName: name})
//
// client-go's Manager.Start is not used: it cannot be stopped while it
// waits for the renewal time. Client.Run and Serving.Run wait on the
// injected clock instead and call the manager's renewal step; they follow
// the lifecycle contract.
package certificate
