//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
)

// TestTerminationMessageAndPodNetwork runs the Agent in-process against
// containerd: (a) a container that writes /dev/termination-log and exits 3
// has that text as its terminated state's message; (b) with
// FallbackToLogsOnError and an empty file, the tail of its log is the
// message; (c) a pod without hostNetwork gets an address from the CNI
// bridge hack/containerd.sh configures, reported as its pod IP.
func TestTerminationMessageAndPodNetwork(t *testing.T) {
	e := setup(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { e.cleanup(t) })
	dir, manifests := agentDirs(t)
	writeManifest(t, manifests, "tmsg", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: tmsg
spec:
  hostNetwork: true
  dnsPolicy: Default
  restartPolicy: Never
  containers:
  - name: file
    image: %[1]s
    command: ["sh", "-c", "printf 'disk full on /data' > /dev/termination-log; exit 3"]
  - name: logs
    image: %[1]s
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo starting; echo 'panic: boom' >&2; exit 2"]
`, e.busybox))
	writeManifest(t, manifests, "net", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: net
spec:
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`, e.busybox))
	sink := newStatusSink()
	agent, err := e.builder(dir, manifests).WithStatusSink(sink).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, agent, 30*time.Second)
	tmsg, netPod := "tmsg-"+nodeName, "net-"+nodeName

	waitFor(t, 60*time.Second, "both containers of tmsg terminated with their messages", func() (bool, string) {
		f, st := sink.container(tmsg, "file")
		l, _ := sink.container(tmsg, "logs")
		if f.State.Terminated == nil || l.State.Terminated == nil {
			return false, fmt.Sprintf("phase %s, file %+v, logs %+v", st.Phase, f.State, l.State)
		}
		return f.State.Terminated.Message != "" && l.State.Terminated.Message != "",
			fmt.Sprintf("file %q, logs %q", f.State.Terminated.Message, l.State.Terminated.Message)
	})
	f, _ := sink.container(tmsg, "file")
	if got := f.State.Terminated; got.ExitCode != 3 || got.Message != "disk full on /data" {
		t.Errorf("file container: exit %d, message %q; want 3 and what it wrote", got.ExitCode, got.Message)
	}
	l, _ := sink.container(tmsg, "logs")
	if got := l.State.Terminated.Message; !strings.Contains(got, "starting\n") || !strings.Contains(got, "panic: boom\n") {
		t.Errorf("logs container message %q, want its log tail", got)
	}
	// The terminal phase is reported once the pod worker has finished the pod.
	waitFor(t, 30*time.Second, "tmsg phase Failed", func() (bool, string) {
		_, st := sink.container(tmsg, "file")
		return st.Phase == v1.PodFailed, "phase " + string(st.Phase)
	})

	waitFor(t, 60*time.Second, "the pod without hostNetwork runs with its own IP", func() (bool, string) {
		c, st := sink.container(netPod, "main")
		return c.State.Running != nil && st.PodIP != "", fmt.Sprintf("phase %s, podIP %q, %+v", st.Phase, st.PodIP, c.State)
	})
	_, st := sink.container(netPod, "main")
	ip := net.ParseIP(st.PodIP)
	if ip == nil || ip.IsLoopback() || st.PodIP == st.HostIP {
		t.Errorf("pod IP %q (host IP %q): want an address of the pod network", st.PodIP, st.HostIP)
	}

	stop()
}
