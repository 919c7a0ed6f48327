package main

import (
	"context"
	"flag"

	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/server/healthz"
)

// apiFlags are the node API flags of the standalone agent: /healthz on
// localhost by default; the rest of the kubelet's API (logs, exec,
// port-forward, pods) only with --port, in a binary built with
// -tags nodeapi (the API adds about 1.7 MB, which the default binary's
// footprint budget has no room for).
type apiFlags struct {
	port           int
	address        string
	healthzPort    int
	healthzAddress string
	clientCAFile   string
	anonymous      bool
	tlsCertFile    string
	tlsKeyFile     string
	// configz serves /configz (with --config and the full API).
	configz func() (any, error)
}

// apiConfigFields are the configuration fields fromConfig takes.
const apiConfigFields = "enableServer address port healthzPort healthzBindAddress tlsCertFile tlsPrivateKeyFile authentication"

// fromConfig makes the API flags and c agree, the flags given winning.
// The HTTPS API stays off (standalone's default) unless the file sets port
// (and not enableServer: false) or --port is given.
func (f *apiFlags) fromConfig(c *kc.KubeletConfiguration, g exconfig.Given, inFile map[string]bool) {
	g.String("healthz-bind-address", &f.healthzAddress, &c.HealthzBindAddress)
	if c.HealthzPort == nil {
		c.HealthzPort = new(int32)
	}
	g.Int("healthz-port", &f.healthzPort, c.HealthzPort)
	serve := inFile["port"] && (c.EnableServer == nil || *c.EnableServer)
	if g["port"] || serve {
		g.Int("port", &f.port, &c.Port)
	}
	if !g["port"] && !serve {
		f.port = 0
		off := false
		c.EnableServer = &off
	}
	g.String("address", &f.address, &c.Address)
	g.String("client-ca-file", &f.clientCAFile, &c.Authentication.X509.ClientCAFile)
	g.Bool("anonymous-auth", &f.anonymous, &c.Authentication.Anonymous.Enabled)
	g.String("tls-cert-file", &f.tlsCertFile, &c.TLSCertFile)
	g.String("tls-private-key-file", &f.tlsKeyFile, &c.TLSPrivateKeyFile)
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.healthzPort, "healthz-port", healthz.DefaultPort, "port of the plain-HTTP /healthz; 0 = off")
	fs.StringVar(&f.healthzAddress, "healthz-bind-address", "127.0.0.1", "IP address of the /healthz port")
	fs.IntVar(&f.port, "port", 0, "serve the kubelet's HTTPS API (pods, logs, exec, attach, port-forward, metrics) on this port (a binary built with -tags nodeapi); 0 = off. Callers need a client certificate of --client-ca-file (or --anonymous-auth) and may do everything: there is no API server to ask")
	fs.StringVar(&f.address, "address", "127.0.0.1", "IP address of the HTTPS API")
	fs.StringVar(&f.clientCAFile, "client-ca-file", "", "CA bundle verifying the API's client certificates (with --port)")
	fs.BoolVar(&f.anonymous, "anonymous-auth", false, "let requests without a client certificate in (with --port)")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "serving certificate of the API; default: a self-signed pair kept in <root>/pki")
	fs.StringVar(&f.tlsKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
}

// wire adds /healthz, or with --port the whole API (wireAPI), to b.
func (f *apiFlags) wire(b *nodekit.Builder, nodeName, root string) error {
	if f.port != 0 {
		return f.wireAPI(b, nodeName, root)
	}
	if f.healthzPort == 0 {
		return nil
	}
	b.WithAgentPart("healthz", func(a *nodekit.Agent) (func(context.Context) error, error) {
		checks := healthz.Checks{SyncLoop: a.Loop().SyncLoopHealthy}
		if e := a.EventedPLEG(); e != nil {
			checks.PLEG = e.Healthy
		} else if g := a.PLEG(); g != nil {
			checks.PLEG = g.Healthy
		}
		hz, err := healthz.New(healthz.Config{Address: f.healthzAddress, Port: f.healthzPort, Checks: checks})
		if err != nil {
			return nil, err
		}
		return hz.Run, nil
	})
	return nil
}
