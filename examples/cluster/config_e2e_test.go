//go:build e2e

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/examples/internal/exutil"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// poll checks cond every 200ms until it holds, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		case <-tick.C:
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestConfigFileAgainstAPIServer starts the cluster example as an operator
// would, with --config: a KubeletConfiguration naming containerd, a static
// pod directory, maxPods, the node status and lease periods, the API's
// address, port and client CA. A --port given on the command line wins over
// the file's, and --manage-cgroups honours its cgroup fields. The test
// checks /configz (the effective configuration, the flag's port in it) and
// behaviour: the static pod's mirror pod runs in the API server, the Node's
// pods capacity is maxPods and its allocatable memory the capacity less
// kubeReserved and the hard eviction threshold, the lease lasts
// nodeLeaseDurationSeconds, and the node status is reported every
// nodeStatusUpdateFrequency (3 s, not the default 5 min).
func TestConfigFileAgainstAPIServer(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start hack/kube-apiserver.sh and load its env")
	}
	name := os.Getenv("NODEKIT_NODE_NAME")
	nodeKC, adminKC, clientCA := os.Getenv("NODEKIT_NODE_KUBECONFIG"), os.Getenv("NODEKIT_ADMIN_KUBECONFIG"), os.Getenv("NODEKIT_KUBELET_CLIENT_CA")
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if name == "" || nodeKC == "" || adminKC == "" || endpoint == "" || clientCA == "" {
		t.Fatal("NODEKIT_NODE_NAME, NODEKIT_NODE_KUBECONFIG, NODEKIT_ADMIN_KUBECONFIG, NODEKIT_KUBELET_CLIENT_CA and NODEKIT_CRI_ENDPOINT must be set")
	}
	busybox := os.Getenv("NODEKIT_BUSYBOX_IMAGE")
	if busybox == "" {
		busybox = "localhost/nodekit/busybox:1"
	}
	ctx := t.Context()
	adminCfg, err := exutil.RestConfig(adminKC, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	const staticPod = "config-static"
	mirror := staticPod + "-" + name
	cri, err := remote.New(remote.Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := cri.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	removeSandboxes := func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin.CoreV1().Pods("default").Delete(cctx, mirror, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		sbs, err := cri.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{kuberuntime.LabelPodName: mirror}})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		for _, sb := range sbs {
			_ = cri.StopPodSandbox(cctx, sb.Id)
			_ = cri.RemovePodSandbox(cctx, sb.Id)
		}
	}
	removeSandboxes()
	t.Cleanup(func() { removeSandboxes(); cri.Close(context.Background()) })

	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"hostNetwork":true,"dnsPolicy":"Default",
"terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":%q,"command":["sleep","3600"]}]}}`, staticPod, busybox)
	if err := os.WriteFile(filepath.Join(manifests, staticPod+".json"), []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	filePort, flagPort := freePort(t), freePort(t)
	config := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
staticPodPath: manifests
podLogsDir: %s
maxPods: 7
kubeReserved: {memory: 50Mi}
evictionHard: {memory.available: 50Mi, nodefs.available: 1%%, imagefs.available: 1%%}
nodeLeaseDurationSeconds: 17
nodeStatusUpdateFrequency: 3s
address: 127.0.0.1
port: %d
healthzPort: 0
failCgroupV1: false
authentication:
  x509: {clientCAFile: %s}
`, endpoint, filepath.Join(dir, "logs"), filePort, clientCA)), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags(flag.NewFlagSet("cluster", flag.ContinueOnError), []string{
		"--kubeconfig", nodeKC, "--node-name", name, "--root", filepath.Join(dir, "root"),
		"--config", config, "--port", strconv.Itoa(flagPort), "--manage-cgroups",
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mainErr(runCtx, o, io.Discard) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		}
	}
	defer stop()

	// Behaviour: the static pod of the file's staticPodPath runs on
	// containerd, mirrored in the API server.
	poll(t, 60*time.Second, "mirror pod "+mirror+" Running", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("the agent stopped: %v", err)
		default:
		}
		p, err := admin.CoreV1().Pods("default").Get(ctx, mirror, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, string(p.Status.Phase)
	})
	// maxPods is the Node's pods capacity; the lease lasts 17 s.
	poll(t, 30*time.Second, "pods capacity 7 and a 17 s lease", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods := n.Status.Capacity[v1.ResourcePods]
		d := l.Spec.LeaseDurationSeconds
		// kubeReserved 50Mi and the 50Mi memory.available threshold are
		// held back from the allocatable memory (--manage-cgroups).
		capMem, allocMem := n.Status.Capacity[v1.ResourceMemory], n.Status.Allocatable[v1.ResourceMemory]
		return pods.Value() == 7 && d != nil && *d == 17 && capMem.Value()-allocMem.Value() == 100<<20,
			fmt.Sprintf("pods %s, lease %v, memory capacity %s allocatable %s", pods.String(), d, capMem.String(), allocMem.String())
	})
	// The node status is reported every 3 s: its Ready heartbeat moves on
	// well within 15 s (the default report frequency is 5 min).
	heartbeat := func() time.Time {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return time.Time{}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	first := heartbeat()
	poll(t, 15*time.Second, "a newer Ready heartbeat", func() (bool, string) {
		h := heartbeat()
		return !first.IsZero() && h.After(first), fmt.Sprintf("first %v, now %v", first, h)
	})

	// /configz on the flag's port (the file's is not served), as the admin
	// (the token webhook and SubjectAccessReview of the file's defaults).
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the agent's self-signed pair
	var cz struct {
		KubeletConfig struct {
			MaxPods                   int32  `json:"maxPods"`
			Port                      int32  `json:"port"`
			NodeLeaseDurationSeconds  int32  `json:"nodeLeaseDurationSeconds"`
			StaticPodPath             string `json:"staticPodPath"`
			NodeStatusUpdateFrequency string `json:"nodeStatusUpdateFrequency"`
			NodeStatusReportFrequency string `json:"nodeStatusReportFrequency"`
			SyncFrequency             string `json:"syncFrequency"`
		} `json:"kubeletconfig"`
	}
	poll(t, 30*time.Second, "/configz", func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://127.0.0.1:%d/configz", flagPort), nil)
		req.Header.Set("Authorization", "Bearer "+adminCfg.BearerToken)
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &cz); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	k := cz.KubeletConfig
	if k.MaxPods != 7 || k.Port != int32(flagPort) || k.NodeLeaseDurationSeconds != 17 || k.StaticPodPath != manifests ||
		k.NodeStatusUpdateFrequency != "3s" || k.NodeStatusReportFrequency != "3s" || k.SyncFrequency != "1m0s" {
		t.Errorf("configz %+v; want maxPods 7, the flag's port %d, lease 17, staticPodPath %s, 3s/3s, sync 1m0s", k, flagPort, manifests)
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", filePort), time.Second); err == nil {
		c.Close()
		t.Errorf("the file's port %d is served too; the flag's %d should replace it", filePort, flagPort)
	}

	// Stop the static pod before the agent (which leaves containers
	// running when it stops).
	if err := os.Remove(filepath.Join(manifests, staticPod+".json")); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "the mirror pod gone", func() (bool, string) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, mirror, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	stop()
}
