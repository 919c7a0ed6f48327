//go:build nodeapi

package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentserver"
	"github.com/nodekit/nodekit/server"
)

// wireAPI adds the whole API: callers with a client certificate of
// --client-ca-file (or anyone with --anonymous-auth) may do everything, a
// standalone agent having no API server to ask.
func (f *apiFlags) wireAPI(b *nodekit.Builder, nodeName, root string) error {
	cfg := server.Config{
		NodeName: nodeName, HealthzPort: f.healthzPort, HealthzAddress: f.healthzAddress,
		Address: f.address, Port: f.port, Anonymous: f.anonymous,
		TLSCertFile: f.tlsCertFile, TLSKeyFile: f.tlsKeyFile, CertDir: filepath.Join(root, "pki"),
		Authorizer: server.AlwaysAllow{}, Configz: f.configz,
	}
	if f.clientCAFile == "" && !f.anonymous {
		return errors.New("--port needs --client-ca-file (or --anonymous-auth)")
	}
	if f.clientCAFile != "" {
		pemBytes, err := os.ReadFile(f.clientCAFile)
		if err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
		cfg.ClientCA = x509.NewCertPool()
		if !cfg.ClientCA.AppendCertsFromPEM(pemBytes) {
			return fmt.Errorf("--client-ca-file %s: no certificate", f.clientCAFile)
		}
	}
	agentserver.Wire(b, agentserver.Config{Server: cfg})
	return nil
}
