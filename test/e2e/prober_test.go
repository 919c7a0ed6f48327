//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
)

func condition(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestProbes runs the Agent in-process with WithProber against containerd:
// (a) an exec liveness probe that starts failing when the container removes
// its file has the container restarted (restart count up, within the
// probe-level grace period of 1s, not the pod's 30s); (b) an httpGet
// readiness probe against busybox httpd flips Ready when the page appears;
// (c) a tcpSocket readiness probe on the same port makes its container
// ready once httpd listens.
func TestProbes(t *testing.T) {
	e := setup(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { e.cleanup(t) })
	dir, manifests := agentDirs(t)
	port := freePort(t)
	writeManifest(t, manifests, "liveness", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: liveness
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "touch /tmp/healthy; sleep 5; rm /tmp/healthy; sleep 3600"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 1
`, e.busybox))
	writeManifest(t, manifests, "web", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: %[1]s
    command: ["sh", "-c", "mkdir -p /www; (sleep 4; echo ok > /www/ready.html) & exec busybox httpd -f -p %[2]d -h /www"]
    ports:
    - name: http
      containerPort: %[2]d
    readinessProbe:
      httpGet:
        path: /ready.html
        port: http
      periodSeconds: 1
  - name: tcp
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    readinessProbe:
      tcpSocket:
        port: %[2]d
      periodSeconds: 1
`, e.busybox, port))
	sink := newStatusSink()
	agent, err := e.builder(dir, manifests).WithStatusSink(sink).WithProber().Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, agent, 30*time.Second)
	live, web := "liveness-"+nodeName, "web-"+nodeName

	// (b), (c): the tcp container is ready once httpd listens, httpd
	// itself only once the page exists (about 4s later).
	var tcpReadyAt time.Time
	waitFor(t, 60*time.Second, "the tcpSocket probe makes container tcp ready", func() (bool, string) {
		c, st := sink.container(web, "tcp")
		h, _ := sink.container(web, "httpd")
		if c.Ready && tcpReadyAt.IsZero() {
			tcpReadyAt = time.Now()
		}
		return c.Ready, fmt.Sprintf("tcp ready %v, httpd ready %v, phase %s", c.Ready, h.Ready, st.Phase)
	})
	if h, st := sink.container(web, "httpd"); h.Ready || condition(st, v1.PodReady) == v1.ConditionTrue {
		t.Logf("httpd was already ready when tcp became ready (the page appeared first)")
	}
	waitFor(t, 30*time.Second, "the httpGet probe makes httpd and the pod Ready", func() (bool, string) {
		h, st := sink.container(web, "httpd")
		return h.Ready && condition(st, v1.PodReady) == v1.ConditionTrue && condition(st, v1.ContainersReady) == v1.ConditionTrue,
			fmt.Sprintf("httpd ready %v, conditions %v", h.Ready, st.Conditions)
	})

	// (a): the liveness pod runs, then is restarted.
	var firstID string
	waitFor(t, 60*time.Second, "liveness pod running", func() (bool, string) {
		c, st := sink.container(live, "main")
		firstID = c.ContainerID
		return c.State.Running != nil, fmt.Sprintf("phase %s, %+v", st.Phase, c.State)
	})
	waitFor(t, 60*time.Second, "liveness failure restarts the container", func() (bool, string) {
		c, _ := sink.container(live, "main")
		return c.RestartCount >= 1 && c.ContainerID != firstID,
			fmt.Sprintf("restarts %d, id %s (first %s), last %+v", c.RestartCount, c.ContainerID, firstID, c.LastTerminationState.Terminated)
	})
	c, _ := sink.container(live, "main")
	if term := c.LastTerminationState.Terminated; term == nil {
		t.Errorf("no last termination state")
	} else {
		// sh ignores SIGTERM: it was killed when the probe's grace of 1s ran
		// out, long before the pod's 30s.
		if d := term.FinishedAt.Sub(term.StartedAt.Time); d > 15*time.Second {
			t.Errorf("the first instance lived %v: the probe-level grace period was not used", d)
		}
		t.Logf("first instance: exit %d %s, lived %v", term.ExitCode, term.Reason, term.FinishedAt.Sub(term.StartedAt.Time))
	}

	stop()
}
