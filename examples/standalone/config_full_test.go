//go:build kubeletconfig

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/examples/internal/exconfig"
)

// TestRunFakeConfig: with --config and no --manifests, the shipped pods
// run under the file's rules: maxPods 3 refuses one of the four
// (OutOfpods) (--healthz-port 0, given, wins over the file's port 1 and
// keeps the test off shared ports); a file with an invalid value stops the
// agent with the kubelet's message.
func TestRunFakeConfig(t *testing.T) {
	root := t.TempDir()
	statusFile := filepath.Join(root, "status.json")
	config := filepath.Join(root, "kubelet.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 3\nhealthzPort: 1\nsyncFrequency: 30s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{root: root, nodeName: "test", duration: 4 * time.Second, statusFile: statusFile, config: config,
		given: exconfig.Given{"healthz-port": true}}
	o.api.healthzPort = 0
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statusFile)
	if err != nil {
		t.Fatal(err)
	}
	var pods []PodReport
	if err := json.Unmarshal(data, &pods); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, p := range pods {
		if p.Phase == "Failed" && p.Reason == "OutOfpods" {
			refused++
		}
	}
	if len(pods) != 4 || refused != 1 {
		t.Errorf("%d pods, %d refused for maxPods 3; want 4 and 1: %s", len(pods), refused, data)
	}

	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = options{root: t.TempDir(), nodeName: "test", config: config, given: exconfig.Given{}}
	if err := run(ctx, o); err == nil || !strings.Contains(err.Error(), "maxPods (--max-pods) -3 must not be a negative number") {
		t.Errorf("invalid file: %v", err)
	}
}
