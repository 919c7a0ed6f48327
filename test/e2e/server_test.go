//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentserver"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/server"
	serverapi "github.com/nodekit/nodekit/server/apiserver"
	"github.com/nodekit/nodekit/stats"
)

// TestServerThroughAPIServer runs an agent on containerd joined to a real
// kube-apiserver, serving its HTTPS API in a network namespace (its node IP) with the API server's
// kubelet-client CA, token webhook and Webhook authorization, and talks to
// it as kubectl does, through the API server: pods/log (follow, tailLines,
// previous after a restart), pods/exec over WebSocket and SPDY (output,
// exit code 3, stdin reaching cat), port-forward over SPDY and WebSocket
// to an httpd in the pod, and nodes/proxy; directly: no credentials 401,
// the node's own token 403, the admin's 200.
func TestServerThroughAPIServer(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start hack/kube-apiserver.sh and load its env")
	}
	name := os.Getenv("NODEKIT_NODE_NAME")
	nodeKC, adminKC, clientCA := os.Getenv("NODEKIT_NODE_KUBECONFIG"), os.Getenv("NODEKIT_ADMIN_KUBECONFIG"), os.Getenv("NODEKIT_KUBELET_CLIENT_CA")
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if name == "" || nodeKC == "" || adminKC == "" || endpoint == "" {
		t.Fatal("NODEKIT_NODE_NAME, NODEKIT_NODE_KUBECONFIG, NODEKIT_ADMIN_KUBECONFIG and NODEKIT_CRI_ENDPOINT must be set")
	}
	if clientCA == "" {
		t.Fatal("NODEKIT_KUBELET_CLIENT_CA is not set: restart the API server with this tree's hack/kube-apiserver.sh")
	}
	busybox := getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	ctx := t.Context()
	adminCfg, nodeCfg := restConfig(t, adminKC), restConfig(t, nodeKC)
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	const logPod, webPod = "srv-logs", "srv-web"
	pods := admin.CoreV1().Pods("default")
	deletePods := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range []string{logPod, webPod} {
			_ = pods.Delete(cctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
	}
	deletePods()
	for _, n := range []string{logPod, webPod} {
		nsPoll(t, 30*time.Second, "leftover pod "+n+" gone", func() (bool, string) {
			_, err := pods.Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}

	auth, err := serverapi.New(serverapi.Config{Client: nodeClient, ClientCAFile: clientCA, TokenWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	// The agent serves its API inside a network namespace the test makes,
	// on the namespace's address, which is also the node's IP: the API
	// server reaches it there for logs, exec and port-forward, and proxies
	// to it for nodes/proxy (it refuses a loopback address for that).
	ln, nodeIP := nsListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithRootDir(dir).WithLogger(log)
	clusterapiserver.Wire(b, clusterapiserver.Config{Client: nodeClient, NodeName: name, Logger: log,
		NodeIPs: []net.IP{nodeIP}, ServerPort: int32(port), StatusUpdateFrequency: time.Second,
		// The API server then passes WebSockets through to the agent,
		// which translates them itself (WebSocketStreams), as the kubelet.
		DeclaredFeatures: []string{"ExtendWebSocketsToKubelet"}})
	var summaries *stats.Provider
	b.WithStats(stats.Config{}, &summaries)
	b.WithAgentPart("server", func(a *nodekit.Agent) (func(ctx context.Context) error, error) {
		srv, err := server.New(agentserver.ServerConfig(a, server.Config{
			NodeName: name, CertDir: filepath.Join(dir, "pki"),
			Authenticator: auth.Authenticator, Authorizer: auth.Authorizer, ClientCA: auth.ClientCA, Logger: log,
			WebSocketStreams: serverapi.WebSocketStreams{},
			Stats:            summaries, ResourceMetrics: stats.NewResourceCollector(summaries, stats.CollectorConfig{Logger: log}),
		}))
		if err != nil {
			return nil, err
		}
		tlsCfg, err := srv.TLSConfig()
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return srv.Serve(ctx, tls.NewListener(ln, tlsCfg), nil) }, nil
	})
	agent, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, agent, 30*time.Second)
	defer func() {
		deletePods()
		nsPoll(t, 60*time.Second, "test pods stopped", func() (bool, string) {
			return len(agent.ActivePods()) == 0, fmt.Sprint(len(agent.ActivePods()))
		})
		stop()
	}()

	nsPoll(t, 60*time.Second, "node Ready advertising the API port", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p := n.Status.DaemonEndpoints.KubeletEndpoint.Port; p != int32(port) {
			return false, fmt.Sprintf("port %d", p)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, c.Message
			}
		}
		return false, "no Ready condition"
	})

	grace, no := int64(1), false
	mkPod := func(podName, script string, restart v1.RestartPolicy) {
		_, err := pods.Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: name, RestartPolicy: restart, AutomountServiceAccountToken: &no,
				TerminationGracePeriodSeconds: &grace, DNSPolicy: v1.DNSDefault,
				Containers: []v1.Container{{Name: "main", Image: busybox, ImagePullPolicy: v1.PullNever,
					Command: []string{"sh", "-c", script}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Three numbered lines and a marker unique to the instance, then a
	// crash after 15 s (time for the tail and follow checks): restarted by the
	// agent.
	mkPod(logPod, `echo boot-$(cat /proc/sys/kernel/random/uuid); for i in 1 2 3; do echo line-$i; done; sleep 15; exit 1`, v1.RestartPolicyAlways)
	mkPod(webPod, `mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 8080 -h /www`, v1.RestartPolicyAlways)
	running := func(podName string) func() (bool, string) {
		return func() (bool, string) {
			p, err := pods.Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
	}
	nsPoll(t, 90*time.Second, webPod+" running", running(webPod))

	t.Run("refusals", func(t *testing.T) {
		base := fmt.Sprintf("https://%s/pods", net.JoinHostPort(nodeIP.String(), strconv.Itoa(port)))
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // the agent's self-signed pair
		}}}
		for _, c := range []struct {
			who, token string
			code       int
		}{{"no credentials", "", 401}, {"the node's token", nodeCfg.BearerToken, 403}, {"the admin", adminCfg.BearerToken, 200}} {
			req, _ := http.NewRequestWithContext(ctx, "GET", base, nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Errorf("%s: %d, want %d (%s)", c.who, resp.StatusCode, c.code, body)
			}
		}
		// The API server's kubelet client certificate, from the CA the
		// agent was given: 200 (the API server presents it for logs,
		// exec, port-forward and nodes/proxy).
		pair, err := tls.LoadX509KeyPair(filepath.Join(filepath.Dir(clientCA), "kubelet-client.crt"), filepath.Join(filepath.Dir(clientCA), "kubelet-client.key"))
		if err != nil {
			t.Fatal(err)
		}
		certClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
		resp, err := certClient.Get(base)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"`+webPod+`"`)) {
			t.Errorf("client certificate: %d %.300s", resp.StatusCode, body)
		}
	})

	execURL := func(podName string, cmd []string, stdin bool) *url.URL {
		return admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(podName).SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "main", Command: cmd, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	}
	executors := map[string]func(u *url.URL) (remotecommand.Executor, error){
		"websocket": func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(adminCfg, "GET", u.String())
		},
		"spdy": func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(adminCfg, "POST", u)
		},
	}
	for proto, mk := range executors {
		t.Run("exec-"+proto, func(t *testing.T) {
			run := func(cmd []string, stdin string) (string, string, error) {
				ex, err := mk(execURL(webPod, cmd, stdin != ""))
				if err != nil {
					t.Fatal(err)
				}
				var out, errOut bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}
				if stdin != "" {
					opts.Stdin = strings.NewReader(stdin)
				}
				sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				err = ex.StreamWithContext(sctx, opts)
				return out.String(), errOut.String(), err
			}
			if out, _, err := run([]string{"echo", "hi"}, ""); err != nil || out != "hi\n" {
				t.Errorf("echo hi: %q %v", out, err)
			}
			_, _, err := run([]string{"sh", "-c", "echo oops >&2; exit 3"}, "")
			var code utilexec.CodeExitError
			if !errors.As(err, &code) || code.Code != 3 {
				t.Errorf("exit 3: %v (%T)", err, err)
			}
			if out, _, err := run([]string{"cat"}, "through stdin\n"); err != nil || out != "through stdin\n" {
				t.Errorf("cat: %q %v", out, err)
			}
		})
	}

	// The node declares ExtendWebSocketsToKubelet: the API server passed
	// the WebSocket streams through to the agent (which translated them:
	// containerd's streaming server does not speak v5.channel.k8s.io).
	t.Run("websockets-proxied-to-agent", func(t *testing.T) {
		raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte(`apiserver_websocket_streaming_requests_total{proxy_type="proxied_to_kubelet",subresource="exec"}`)) {
			t.Errorf("the API server did not pass exec WebSockets to the agent")
		}
	})

	pfURL := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(webPod).SubResource("portforward").URL()
	for _, proto := range []string{"spdy", "websocket"} {
		t.Run("portforward-"+proto, func(t *testing.T) {
			tr, upgrader, err := spdy.RoundTripperFor(adminCfg)
			if err != nil {
				t.Fatal(err)
			}
			dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", pfURL)
			if proto == "websocket" {
				wsURL := *pfURL
				ws, err := portforward.NewSPDYOverWebsocketDialer(&wsURL, adminCfg)
				if err != nil {
					t.Fatal(err)
				}
				dialer = ws
			}
			stop, ready := make(chan struct{}), make(chan struct{})
			errOut := &syncBuffer{}
			pf, err := portforward.New(dialer, []string{"0:8080"}, stop, ready, io.Discard, errOut)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- pf.ForwardPorts(); close(done) }()
			defer func() {
				close(stop)
				<-done
			}()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("port-forward ended: %v (%s)", err, errOut.String())
			case <-time.After(60 * time.Second):
				t.Fatal("port-forward not ready in 60s")
			}
			ports, err := pf.GetPorts()
			if err != nil || len(ports) != 1 {
				t.Fatalf("ports %v %v", ports, err)
			}
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://127.0.0.1:" + strconv.Itoa(int(ports[0].Local)) + "/index.html")
			if err != nil {
				t.Fatalf("GET through the forward: %v (%s)", err, errOut.String())
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "hello-from-pod\n" {
				t.Errorf("through the forward: %d %q", resp.StatusCode, body)
			}
		})
	}

	// The stats as metrics-server and kubectl top read them: through the
	// API server's nodes/proxy, parsed into the kubelet's Summary and the
	// Prometheus text format, with the web pod's CPU and memory non-zero.
	t.Run("nodes-proxy-stats", func(t *testing.T) {
		proxy := func(path string) ([]byte, error) {
			return admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", name, "proxy", path).Do(ctx).Raw()
		}
		nsPoll(t, 60*time.Second, "the web pod's CPU and memory in /stats/summary through nodes/proxy", func() (bool, string) {
			raw, err := proxy("stats/summary")
			if err != nil {
				return false, err.Error()
			}
			var sum statsapi.Summary
			if err := json.Unmarshal(raw, &sum); err != nil {
				return false, err.Error()
			}
			if sum.Node.NodeName != name {
				return false, "node " + sum.Node.NodeName
			}
			for _, p := range sum.Pods {
				if p.PodRef.Name != webPod || p.PodRef.Namespace != "default" {
					continue
				}
				if p.CPU == nil || p.CPU.UsageCoreNanoSeconds == nil || *p.CPU.UsageCoreNanoSeconds == 0 ||
					p.Memory == nil || p.Memory.WorkingSetBytes == nil || *p.Memory.WorkingSetBytes == 0 {
					return false, fmt.Sprintf("pod stats %+v %+v", p.CPU, p.Memory)
				}
				return true, ""
			}
			return false, fmt.Sprintf("no %s among %d pods", webPod, len(sum.Pods))
		})
		nsPoll(t, 60*time.Second, "the web pod's CPU and memory in /metrics/resource through nodes/proxy", func() (bool, string) {
			raw, err := proxy("metrics/resource")
			if err != nil {
				return false, err.Error()
			}
			parser := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
			if err != nil {
				return false, err.Error()
			}
			value := func(family string) float64 {
				f := fams[family]
				if f == nil {
					return 0
				}
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["pod"] != webPod || labels["namespace"] != "default" {
						continue
					}
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
				return 0
			}
			cpu, mem := value("pod_cpu_usage_seconds_total"), value("pod_memory_working_set_bytes")
			ccpu, cmem := value("container_cpu_usage_seconds_total"), value("container_memory_working_set_bytes")
			if cpu <= 0 || mem <= 0 || ccpu <= 0 || cmem <= 0 {
				return false, fmt.Sprintf("pod cpu %v memory %v, container cpu %v memory %v", cpu, mem, ccpu, cmem)
			}
			return true, ""
		})
	})

	t.Run("logs", func(t *testing.T) {
		if _, ok := any(agent.Runtime()).(server.ContainerLogs); !ok {
			t.Skip("the runtime engine serves no container logs yet (kuberuntime/logs' GetContainerLogs)")
		}
		nsPoll(t, 90*time.Second, logPod+" running", running(logPod))
		logs := func(o *v1.PodLogOptions) (string, error) {
			raw, err := pods.GetLogs(logPod, o).DoRaw(ctx)
			return string(raw), err
		}
		nsPoll(t, 30*time.Second, "three lines logged", func() (bool, string) {
			s, err := logs(&v1.PodLogOptions{})
			return strings.Contains(s, "line-3"), fmt.Sprint(s, err)
		})
		two := int64(2)
		if s, err := logs(&v1.PodLogOptions{TailLines: &two}); err != nil || s != "line-2\nline-3\n" {
			t.Errorf("tailLines=2: %q %v", s, err)
		}
		// follow: the stream stays open and delivers what is written.
		sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
		defer scancel()
		one := int64(1)
		stream, err := pods.GetLogs(logPod, &v1.PodLogOptions{Follow: true, TailLines: &one}).Stream(sctx)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stream).ReadString('\n')
		stream.Close()
		if err != nil || line != "line-3\n" {
			t.Errorf("follow, tailLines=1: %q %v", line, err)
		}
		// previous, after the crash and restart.
		var current string
		nsPoll(t, 90*time.Second, logPod+" restarted", func() (bool, string) {
			p, err := pods.Get(ctx, logPod, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, fmt.Sprint(err)
			}
			c := p.Status.ContainerStatuses[0]
			if c.RestartCount < 1 || c.State.Running == nil {
				return false, fmt.Sprint(c.RestartCount)
			}
			current, _ = logs(&v1.PodLogOptions{})
			return strings.Contains(current, "boot-"), current
		})
		prev, err := logs(&v1.PodLogOptions{Previous: true})
		if err != nil || !strings.Contains(prev, "line-3\n") || !strings.HasPrefix(prev, "boot-") {
			t.Fatalf("previous: %q %v", prev, err)
		}
		if strings.SplitN(prev, "\n", 2)[0] == strings.SplitN(current, "\n", 2)[0] {
			t.Errorf("previous shows the current instance: %q", prev)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the port forwarder's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
