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
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentserver"
	"github.com/nodekit/nodekit/examples/internal/exconfig"
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
	// The webhook cache TTLs of a configuration file (0: the kubelet's).
	tokenTTL, authorizedTTL, unauthorizedTTL time.Duration
	// Configz serves /configz (kubeletconfig's Applied.Configz with
	// --config); nil: 404.
	Configz func() (any, error)
}

// ConfigFields are the KubeletConfiguration fields the flags stand for
// (FromConfig).
const ConfigFields = "enableServer address port healthzPort healthzBindAddress tlsCertFile tlsPrivateKeyFile " +
	"authentication authorization streamingConnectionIdleTimeout"

// FromConfig makes the flags and c agree, the flags given on the command
// line winning (as the kubelet's); the webhook cache TTLs come from c.
// enableServer false turns the API off (port 0) unless --port is given.
func (f *Flags) FromConfig(c *kubeletconfigv1beta1.KubeletConfiguration, g exconfig.Given) {
	g.String("address", &f.Address, &c.Address)
	// --port 0 is enableServer: false (c keeps its port, as the kubelet's
	// configuration does); another --port turns the server on.
	switch on := c.EnableServer == nil || *c.EnableServer; {
	case g["port"]:
		on = f.Port != 0
		c.EnableServer = &on
		if on {
			c.Port = int32(f.Port)
		}
	case !on:
		f.Port = 0
	default:
		f.Port = int(c.Port)
	}
	g.String("healthz-bind-address", &f.HealthzAddress, &c.HealthzBindAddress)
	if c.HealthzPort == nil {
		c.HealthzPort = new(int32)
	}
	g.Int("healthz-port", &f.HealthzPort, c.HealthzPort)
	g.String("tls-cert-file", &f.TLSCertFile, &c.TLSCertFile)
	g.String("tls-private-key-file", &f.TLSKeyFile, &c.TLSPrivateKeyFile)
	g.String("client-ca-file", &f.ClientCAFile, &c.Authentication.X509.ClientCAFile)
	g.Bool("authentication-token-webhook", &f.TokenWebhook, &c.Authentication.Webhook.Enabled)
	mode := string(c.Authorization.Mode)
	g.String("authorization-mode", &f.AuthzMode, &mode)
	c.Authorization.Mode = kubeletconfigv1beta1.KubeletAuthorizationMode(mode)
	g.Bool("anonymous-auth", &f.Anonymous, &c.Authentication.Anonymous.Enabled)
	g.Duration("streaming-connection-idle-timeout", &f.IdleTimeout, &c.StreamingConnectionIdleTimeout)
	f.tokenTTL = c.Authentication.Webhook.CacheTTL.Duration
	f.authorizedTTL = c.Authorization.Webhook.CacheAuthorizedTTL.Duration
	f.unauthorizedTTL = c.Authorization.Webhook.CacheUnauthorizedTTL.Duration
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
		TokenWebhook: f.TokenWebhook, AuthorizationMode: f.AuthzMode,
		TokenCacheTTL: f.tokenTTL, AuthorizedTTL: f.authorizedTTL, UnauthorizedTTL: f.unauthorizedTTL})
	if err != nil {
		return 0, fmt.Errorf("server: %w", err)
	}
	agentserver.Wire(b, agentserver.Config{Server: server.Config{
		NodeName: nodeName, Address: f.Address, Port: f.Port, HealthzAddress: f.HealthzAddress, HealthzPort: f.HealthzPort,
		TLSCertFile: f.TLSCertFile, TLSKeyFile: f.TLSKeyFile, CertDir: filepath.Join(root, "pki"), GetCertificate: f.GetCertificate,
		Authenticator: auth.Authenticator, Authorizer: auth.Authorizer, ClientCA: auth.ClientCA, Anonymous: f.Anonymous,
		StreamingIdleTimeout: f.IdleTimeout, Metrics: metrics, Logger: log, Configz: f.Configz,
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
