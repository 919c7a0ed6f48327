//go:build !kubeletconfig

package main

import (
	"errors"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit"
)

// configFile: this binary has no KubeletConfiguration support.
type configFile struct{}

// loadConfig refuses --config: the kubelet's configuration types link
// component-base (feature gates, logging and tracing options, cobra),
// about 1.5 MB the default binary stays under its 25 MB budget without.
func loadConfig(o *options, _ string) (*configFile, error) {
	if o.config != "" {
		return nil, errors.New("--config: this binary reads no KubeletConfiguration; build it with `go build -tags kubeletconfig ./examples/standalone`")
	}
	return nil, nil
}

func (*configFile) setStaticPodPath(string) {}

func (*configFile) apply(*nodekit.Builder, *options, *zap.Logger) error { return nil }
