package main

import (
	"context"
	"flag"

	"github.com/nodekit/nodekit"
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
	//lint:ignore U1000 set with -tags kubeletconfig and read with -tags nodeapi
	configz func() (any, error)
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
