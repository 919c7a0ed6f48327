package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "node.kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
users:
- name: u
  user:
    token: secret
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(options{kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" || cfg.TLSClientConfig.CAFile != filepath.Join(dir, "ca.crt") {
		t.Fatalf("config = host %q token %q ca %q", cfg.Host, cfg.BearerToken, cfg.TLSClientConfig.CAFile)
	}
	cfg, err = restConfig(options{server: "https://h:1", token: "t", ca: "/ca"})
	if err != nil || cfg.Host != "https://h:1" || cfg.BearerToken != "t" || cfg.TLSClientConfig.CAFile != "/ca" {
		t.Fatalf("flags: %+v %v", cfg, err)
	}
	for _, o := range []options{{}, {server: "https://h:1"}, {kubeconfig: kc, token: "t"}, {kubeconfig: filepath.Join(dir, "none")}} {
		if _, err := restConfig(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestRunFake runs the agent on the fake runtime against a fake API server
// with one pod bound to the node: the table shows it Running.
func TestRunFake(t *testing.T) {
	client := fake.NewClientset()
	if _, err := client.CoreV1().Pods("default").Create(t.Context(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run(ctx, options{nodeName: "n1", root: t.TempDir(), duration: 4 * time.Second, images: "busybox"}, client, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`default/web\s+api\s+Running\s+1/1`).MatchString(out.String()) {
		t.Fatalf("table never showed the pod running:\n%s", out.String())
	}
	if err := run(ctx, options{}, client, &out); err == nil {
		t.Fatal("no node name: no error")
	}
}

func TestParseNodeIPs(t *testing.T) {
	for in, want := range map[string]string{"": "[]", "10.0.0.1": "[10.0.0.1]", "10.0.0.1,fd00::1": "[10.0.0.1 fd00::1]", "::": "[::]"} {
		if ips, err := parseNodeIPs(in); err != nil || fmt.Sprint(ips) != want {
			t.Errorf("parseNodeIPs(%q) = %v, %v, want %s", in, ips, err, want)
		}
	}
	for _, in := range []string{"node1", "10.0.0.1,10.0.0.2", "10.0.0.1,fd00::1,10.0.0.3", "10.0.0.1,"} {
		if _, err := parseNodeIPs(in); err == nil || !strings.Contains(err.Error(), "--node-ip") {
			t.Errorf("parseNodeIPs(%q) = %v, want an error naming --node-ip", in, err)
		}
	}
}

// TestRunDevicePlugins: --device-plugins serves the registration socket
// under the root directory.
func TestRunDevicePlugins(t *testing.T) {
	root, err := os.MkdirTemp("", "nkc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var out bytes.Buffer
		done <- run(ctx, options{nodeName: "n1", root: root, duration: 3 * time.Second, images: "busybox", devicePlugins: true}, fake.NewClientset(), &out)
	}()
	sock := filepath.Join(root, "device-plugins", "kubelet.sock")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seen := false; !seen; {
		select {
		case err := <-done:
			t.Fatalf("run returned %v before %s appeared", err, sock)
		case <-tick.C:
			fi, err := os.Stat(sock)
			seen = err == nil && fi.Mode()&os.ModeSocket != 0
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after the agent stopped: %v", err)
	}
}
