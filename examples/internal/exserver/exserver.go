// Package exserver holds the kubelet's API server flags of the cluster
// examples (examples/cluster, examples/edge) and wires package server
// with them.
package exserver

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentserver"
	"github.com/nodekit/nodekit/server"
	serverapi "github.com/nodekit/nodekit/server/apiserver"
	"github.com/nodekit/nodekit/stats"
)

// Flags are the kubelet's flags for its API.
type Flags struct {
	Address        string
	Port           int
	HealthzAddress string
	HealthzPort    int
	TLSCertFile    string
	TLSKeyFile     string
	ClientCAFile   string
	TokenWebhook   bool
	AuthzMode      string
	Anonymous      bool
	IdleTimeout    time.Duration
	// GetCertificate, when set (not a flag), serves the certificate it
	// gives instead of --tls-cert-file or the self-signed pair: the
	// serving certificate from kubelet-serving CSRs
	// (--rotate-server-certificates, package excerts).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Register adds the flags to fs with the kubelet's defaults (the token
// webhook on, as the kubelet's configuration file defaults it).
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Address, "address", "0.0.0.0", "IP address the HTTPS API serves on")
	fs.IntVar(&f.Port, "port", server.DefaultPort, "port of the HTTPS API (logs, exec, attach, port-forward, metrics); 0 = off")
	fs.StringVar(&f.HealthzAddress, "healthz-bind-address", "127.0.0.1", "IP address of the plain-HTTP /healthz port")
	fs.IntVar(&f.HealthzPort, "healthz-port", server.DefaultHealthzPort, "port of the plain-HTTP /healthz; 0 = off")
	fs.StringVar(&f.TLSCertFile, "tls-cert-file", "", "serving certificate (chain) of the HTTPS API; default: a self-signed pair kept in <root>/pki")
	fs.StringVar(&f.TLSKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.StringVar(&f.ClientCAFile, "client-ca-file", "", "CA bundle verifying client certificates (the API server's kubelet client certificate)")
	fs.BoolVar(&f.TokenWebhook, "authentication-token-webhook", true, "authenticate bearer tokens with TokenReview")
	fs.StringVar(&f.AuthzMode, "authorization-mode", serverapi.ModeWebhook, "Webhook (SubjectAccessReview) or AlwaysAllow")
	fs.BoolVar(&f.Anonymous, "anonymous-auth", false, "let requests without credentials in as system:anonymous (still authorized)")
	fs.DurationVar(&f.IdleTimeout, "streaming-connection-idle-timeout", server.DefaultStreamingIdleTimeout, "close exec, attach and port-forward streams idle this long")
}

// Wire makes b serve the API (nothing when Port is 0) with authentication
// and authorization by the API server through client, and returns the port
// to advertise in the node's status.
func (f *Flags) Wire(b *nodekit.Builder, client kubernetes.Interface, nodeName, root string, metrics prometheus.Gatherer, log *zap.Logger) (int32, error) {
	if f.Port == 0 {
		return 0, nil
	}
	auth, err := serverapi.New(serverapi.Config{Client: client, ClientCAFile: f.ClientCAFile,
		TokenWebhook: f.TokenWebhook, AuthorizationMode: f.AuthzMode})
	if err != nil {
		return 0, fmt.Errorf("server: %w", err)
	}
	agentserver.Wire(b, agentserver.Config{Server: server.Config{
		NodeName: nodeName, Address: f.Address, Port: f.Port, HealthzAddress: f.HealthzAddress, HealthzPort: f.HealthzPort,
		TLSCertFile: f.TLSCertFile, TLSKeyFile: f.TLSKeyFile, CertDir: filepath.Join(root, "pki"), GetCertificate: f.GetCertificate,
		Authenticator: auth.Authenticator, Authorizer: auth.Authorizer, ClientCA: auth.ClientCA, Anonymous: f.Anonymous,
		StreamingIdleTimeout: f.IdleTimeout, Metrics: metrics, Logger: log,
		WebSocketStreams: serverapi.WebSocketStreams{},
	}, Stats: &stats.Config{}})
	return int32(f.Port), nil
}

// ParseIPs reads a --node-ip list (comma-separated addresses).
func ParseIPs(s string) ([]net.IP, error) {
	var out []net.IP
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ip := net.ParseIP(f)
		if ip == nil {
			return nil, fmt.Errorf("--node-ip: %q is not an IP address", f)
		}
		out = append(out, ip)
	}
	return out, nil
}

// DeclaredFeatures are the features the node declares when it serves the
// API: its WebSocket translation (the API server then passes WebSockets
// through, as to a kubelet 1.36).
func (f *Flags) DeclaredFeatures() []string {
	if f.Port == 0 {
		return nil
	}
	return []string{"ExtendWebSocketsToKubelet"}
}
