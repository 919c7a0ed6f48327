//go:build !kubeletconfig

package main

import (
	"strings"
	"testing"
)

// The default binary refuses --config, saying how to build one that reads
// it.
func TestConfigNeedsTag(t *testing.T) {
	o := options{root: t.TempDir(), nodeName: "test", config: "kubelet.yaml"}
	if err := run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "-tags kubeletconfig") {
		t.Errorf("--config without the tag: %v", err)
	}
}
