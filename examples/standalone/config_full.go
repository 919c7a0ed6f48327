//go:build kubeletconfig

package main

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/kubeletconfig"
)

// configFile is the loaded --config; nil without it.
type configFile struct{ *kubeletconfig.File }

// loadConfig reads --config (nil without it) and makes the flags and the
// file agree, a flag given on the command line winning. Without podLogsDir
// in the file, container logs stay under root (the kubelet's /var/log/pods
// needs root).
func loadConfig(o *options, root string) (*configFile, error) {
	if o.config == "" {
		return nil, nil
	}
	f, err := kubeletconfig.LoadFile(o.config)
	if err != nil {
		return nil, err
	}
	c, g := f.Config, o.given
	g.String("manifests", &o.manifests, &c.StaticPodPath)
	g.String("manifest-url", &o.manifestURL, &c.StaticPodURL)
	if g["manifest-url-header"] {
		c.StaticPodURLHeader = map[string][]string(o.manifestURLHeaders.h.Clone())
	}
	if f.Given["containerRuntimeEndpoint"] || g["runtime-endpoint"] {
		g.String("runtime-endpoint", &o.endpoint, &c.ContainerRuntimeEndpoint)
	}
	if !f.Given["podLogsDir"] {
		c.PodLogsDir = filepath.Join(root, "pod-logs")
	}
	o.api.fromConfig(c, g, f.Given)
	return &configFile{f}, nil
}

// setStaticPodPath records the manifest directory standalone chose (the
// shipped examples) when neither the file nor a flag named one.
func (f *configFile) setStaticPodPath(dir string) {
	if f != nil {
		f.Config.StaticPodPath = dir
	}
}

// apply maps the configuration onto b (kubeletconfig.Apply) when there is
// one; the program then makes no Builder calls of its own for the fields
// it maps.
func (f *configFile) apply(b *nodekit.Builder, o *options, log *zap.Logger) error {
	if f == nil {
		return nil
	}
	applied, err := kubeletconfig.Apply(b, f.Config, kubeletconfig.Options{
		Runtime: o.endpoint != "", Logger: log,
		Parts: []kubeletconfig.Part{{Name: "server", Fields: kubeletconfig.FieldsOf(apiConfigFields)}},
	})
	if err != nil {
		return fmt.Errorf("--config %s: %w", f.Path, err)
	}
	o.api.configz = applied.Configz
	return nil
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
