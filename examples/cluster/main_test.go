package main

import (
	"bytes"
	"context"
	"flag"
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

	"github.com/nodekit/nodekit/examples/internal/exconfig"
	"github.com/nodekit/nodekit/nodeshutdown"
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

// TestRunConfig: --config's values are used (max pods in the Node's
// capacity, the lease duration, the taints, no API server with
// enableServer false) unless a flag is given: --manifests wins over the
// file's staticPodPath. A bad file is an error naming it and the field.
func TestRunConfig(t *testing.T) {
	dir := t.TempDir()
	fileDir, flagDir := filepath.Join(dir, "file"), filepath.Join(dir, "flag")
	for d, name := range map[string]string{fileDir: "fromfile", flagDir: "fromflag"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, name)
		if err := os.WriteFile(filepath.Join(d, name+".json"), []byte(pod), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
enableServer: false
staticPodPath: file
podLogsDir: `+filepath.Join(dir, "logs")+`
maxPods: 9
nodeLeaseDurationSeconds: 13
registerWithTaints: [{key: example.com/config, value: "yes", effect: NoSchedule}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	o := options{nodeName: "n1", root: t.TempDir(), duration: 4 * time.Second, images: "busybox",
		config: config, manifests: flagDir, given: exconfig.Given{"manifests": true}}
	if err := run(ctx, o, client, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`default/fromflag-n1\s+file\s+Running`).MatchString(out.String()) || strings.Contains(out.String(), "fromfile") {
		t.Errorf("want the --manifests pod, not the file's staticPodPath's:\n%s", out.String())
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pods := node.Status.Capacity[v1.ResourcePods]; pods.Value() != 9 {
		t.Errorf("pods capacity %s, want the file's maxPods 9", pods.String())
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "example.com/config" {
		t.Errorf("taints %v", node.Spec.Taints)
	}
	lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 13 {
		t.Errorf("lease %+v, %v: want 13 s", lease, err)
	}

	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = options{nodeName: "n1", root: t.TempDir(), images: "busybox", config: config, given: exconfig.Given{}}
	if err := run(ctx, o, fake.NewClientset(), &out); err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), `unknown field "maxPodz"`) {
		t.Errorf("bad file: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("cluster", flag.ContinueOnError), []string{"--node-name", "n", "--config", "k.yaml", "--port", "0"})
	if err != nil || o.nodeName != "n" || o.config != "k.yaml" || o.api.Port != 0 || !o.given["port"] || o.given["address"] {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := parseFlags(flag.NewFlagSet("cluster", flag.ContinueOnError), []string{"--nope"}); err == nil {
		t.Error("unknown flag: no error")
	}
}

// The file's graceful shutdown and certificate fields reach their flags, and a flag
// given on the command line overrides the file's value (and the effective
// configuration shows the flag's).
func TestLoadConfigShutdownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	file := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
rotateCertificates: true
serverTLSBootstrap: true
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags(flag.NewFlagSet("cluster", flag.ContinueOnError), []string{"--node-name", "n", "--config", path, "--shutdown-grace-period-critical-pods", "5s", "--rotate-server-certificates=false"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.loadConfig(); err != nil {
		t.Fatal(err)
	}
	if o.shutdown.GracePeriod != 30*time.Second || o.shutdown.GracePeriodCriticalPods != 5*time.Second {
		t.Errorf("shutdown flags = %v, %v; want 30s from the file, 5s from the command line", o.shutdown.GracePeriod, o.shutdown.GracePeriodCriticalPods)
	}
	if !o.certs.Rotate || o.certs.RotateServer || o.file.Config.ServerTLSBootstrap {
		t.Errorf("certificate flags: rotate %v, rotate server %v (file %v); want true from the file, false from the command line",
			o.certs.Rotate, o.certs.RotateServer, o.file.Config.ServerTLSBootstrap)
	}
	if got := o.file.Config.ShutdownGracePeriodCriticalPods.Duration; got != 5*time.Second {
		t.Errorf("effective shutdownGracePeriodCriticalPods = %v, want the flag's 5s", got)
	}

	byPriority := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriodByPodPriority:
- priority: 0
  shutdownGracePeriodSeconds: 20
- priority: 2000000000
  shutdownGracePeriodSeconds: 10
`
	if err := os.WriteFile(path, []byte(byPriority), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseFlags(flag.NewFlagSet("cluster", flag.ContinueOnError), []string{"--node-name", "n", "--config", path})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.loadConfig(); err != nil {
		t.Fatal(err)
	}
	if len(o.shutdownByPriority) != 2 || o.shutdownByPriority[1].Priority != 2000000000 || o.shutdownByPriority[1].ShutdownGracePeriodSeconds != 10 {
		t.Errorf("shutdownByPriority = %+v", o.shutdownByPriority)
	}
}

// TestRunShutdownStateFile: with a grace period the graceful shutdown gets
// the agent's registry, so it keeps the kubelet's state file in --root and
// loads it at start: a corrupt one left by a previous run is set aside as
// .corrupt (no API server needed for that, and no shutdown).
func TestRunShutdownStateFile(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, nodeshutdown.StateFileName)
	if err := os.WriteFile(state, []byte(`{"startTime":"2026-02-03T03:0`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	o := options{nodeName: "n1", root: root, duration: 2 * time.Second, images: "busybox"}
	o.shutdown.GracePeriod = 10 * time.Second
	var out bytes.Buffer
	if err := run(ctx, o, fake.NewClientset(), &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(state + ".corrupt"); err != nil {
		t.Errorf("corrupt state file not set aside (%v): the shutdown has no state dir", err)
	}
}
