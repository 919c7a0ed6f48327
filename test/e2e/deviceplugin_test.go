//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/kuberuntime"
)

// widgetProc is the examples/deviceplugin binary running.
type widgetProc struct {
	cmd     *exec.Cmd
	done    chan error
	stopped bool
}

func startWidgets(t *testing.T, bin, pluginDir, stateDir string) *widgetProc {
	t.Helper()
	c := exec.Command(bin, "--plugin-dir", pluginDir, "--state-dir", stateDir, "--count", "3", "--health-period", "200ms")
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(stateDir), "plugin.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout, c.Stderr = logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	p := &widgetProc{cmd: c, done: make(chan error, 1)}
	go func() { p.done <- c.Wait() }()
	return p
}

func (p *widgetProc) stop(t *testing.T) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("the widget plugin did not stop within 20s of SIGTERM")
	}
}

// widgetCounts reads example.com/widget from the Node in the API server.
func widgetCounts(ctx context.Context, admin kubernetes.Interface, node string) (capacity, allocatable int64, err error) {
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	c, a := n.Status.Capacity["example.com/widget"], n.Status.Allocatable["example.com/widget"]
	return c.Value(), a.Value(), nil
}

// TestDevicePluginsAgainstAPIServer: the example device plugin
// (examples/deviceplugin, a process of its own) serves 3 widgets to an
// agent on containerd joined to a real kube-apiserver. The Node shows
// example.com/widget 3 in capacity and allocatable; a pod asking for 2
// runs and sees them (WIDGET_IDS, the mounted host files and the device
// nodes, in its log);
// a second pod asking for 2 is rejected at admission with the kubelet's
// reason; the agent restarted keeps the first pod running with its
// devices and gives a new pod only the third one; the plugin restarted
// registers again (allocatable 0 while it is away, 3 once back); a widget
// marked unhealthy lowers allocatable to 2.
func TestDevicePluginsAgainstAPIServer(t *testing.T) {
	e := newAPIEnv(t)
	name, endpoint, busybox, nodeClient, admin, cri := e.name, e.endpoint, e.busybox, e.node, e.admin, e.cri
	ctx := t.Context()

	// Short paths: unix sockets hold at most 107 bytes.
	dir, err := os.MkdirTemp("", "nkdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pluginDir, stateDir := filepath.Join(dir, "device-plugins"), filepath.Join(dir, "widgets")
	bin := filepath.Join(dir, "deviceplugin")
	build := exec.Command("go", "build", "-o", bin, "./examples/deviceplugin")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/deviceplugin: %v\n%s", err, out)
	}

	const podA, podB, podC = "widgets-a", "widgets-b", "widgets-c"
	e.removePods(t, podA, podB, podC)

	// startAgent builds and runs an agent with a device manager on
	// pluginDir; stop waits for it to return.
	var dm *devicemanager.Manager
	startAgent := func() (stop func()) {
		var err error
		dm, err = devicemanager.New(devicemanager.Config{PluginDir: pluginDir, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))})
		if err != nil {
			t.Fatal(err)
		}
		b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithRootDir(filepath.Join(dir, "root")).WithDeviceManager(dm)
		agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
			Client: nodeClient, NodeName: name, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), StatusUpdateFrequency: time.Second,
		}).Build()
		if err != nil {
			t.Fatal(err)
		}
		return runAgent(t, agent, 30*time.Second)
	}
	stopAgent := startAgent()
	plugin := startWidgets(t, bin, pluginDir, stateDir)
	t.Cleanup(func() { plugin.stop(t) })

	// waitCounts waits until the agent's device manager and then the Node
	// in the API server (which may still hold an earlier run's figures)
	// show the counts.
	waitCounts := func(what string, wantCap, wantAlloc int64) {
		t.Helper()
		nsPoll(t, 90*time.Second, what+" (device manager)", func() (bool, string) {
			c, a := dm.DeviceCapacity()
			cq, aq := c["example.com/widget"], a["example.com/widget"]
			return cq.Value() == wantCap && aq.Value() == wantAlloc, fmt.Sprintf("capacity %d allocatable %d", cq.Value(), aq.Value())
		})
		nsPoll(t, 90*time.Second, what, func() (bool, string) {
			c, a, err := widgetCounts(ctx, admin, name)
			if err != nil {
				return false, err.Error()
			}
			return c == wantCap && a == wantAlloc, fmt.Sprintf("capacity %d allocatable %d", c, a)
		})
	}
	waitCounts("example.com/widget 3 in capacity and allocatable", 3, 3)

	no := false
	grace := int64(2)
	widgetPod := func(podName string, n int64) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: "default"},
			Spec: v1.PodSpec{
				NodeName: name, HostNetwork: true, DNSPolicy: v1.DNSDefault,
				AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{
					Name: "main", Image: busybox, ImagePullPolicy: v1.PullNever,
					Command: []string{"sh", "-c", "echo WIDGET_IDS=$WIDGET_IDS; cat /widgets/*; for d in /dev/widget-*; do test -c $d && echo chardev $d; done; trap 'exit 0' TERM; sleep 3600 & wait"},
					Resources: v1.ResourceRequirements{
						Limits: v1.ResourceList{"example.com/widget": *resource.NewQuantity(n, resource.DecimalSI)},
					},
				}},
			},
		}
	}
	// containerOf returns the running container of a pod and its log.
	containerOf := func(podName string) (id, log string) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cs, err := cri.ListContainers(cctx, &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		if err != nil {
			return "", err.Error()
		}
		for _, c := range cs {
			if c.GetLabels()[kuberuntime.LabelPodName] != podName {
				continue
			}
			st, err := cri.ContainerStatus(cctx, c.Id, false)
			if err != nil {
				return c.Id, err.Error()
			}
			b, _ := os.ReadFile(st.GetStatus().GetLogPath())
			return c.Id, string(b)
		}
		return "", ""
	}
	runningWith := func(podName string, wantLog ...string) (containerID string) {
		t.Helper()
		nsPoll(t, 90*time.Second, podName+" Running with its widgets", func() (bool, string) {
			p, err := admin.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			id, log := containerOf(podName)
			for _, w := range wantLog {
				if !strings.Contains(log, w) {
					return false, fmt.Sprintf("phase %s, log %q lacks %q", p.Status.Phase, log, w)
				}
			}
			containerID = id
			return p.Status.Phase == v1.PodRunning && id != "", "phase " + string(p.Status.Phase)
		})
		return containerID
	}

	// A pod asking for 2 runs and sees its widgets from inside.
	if _, err := admin.CoreV1().Pods("default").Create(ctx, widgetPod(podA, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	idA := runningWith(podA, "WIDGET_IDS=w0,w1", "widget w0", "widget w1", "chardev /dev/widget-w0", "chardev /dev/widget-w1")
	a, err := admin.CoreV1().Pods("default").Get(ctx, podA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heldA := dm.ContainerDevices(string(a.UID), "main")["example.com/widget"]
	if strings.Join(heldA, ",") != "w0,w1" {
		t.Fatalf("the manager says pod a holds %v", heldA)
	}

	// A second pod asking for 2 is rejected at admission.
	if _, err := admin.CoreV1().Pods("default").Create(ctx, widgetPod(podB, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 90*time.Second, podB+" rejected with UnexpectedAdmissionError", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, podB, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "UnexpectedAdmissionError" &&
				strings.Contains(p.Status.Message, "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected"),
			fmt.Sprintf("phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	})

	// The agent restarted keeps pod a's container and devices; a new pod
	// gets only the third widget.
	stopAgent()
	startAgent()
	waitCounts("widgets back after the agent restart", 3, 3)
	if got := runningWith(podA); got != idA {
		t.Fatalf("pod a's container changed across the agent restart: %s, was %s", got, idA)
	}
	if got := dm.ContainerDevices(string(a.UID), "main")["example.com/widget"]; strings.Join(got, ",") != "w0,w1" {
		t.Fatalf("after the restart pod a holds %v, want [w0 w1]", got)
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, widgetPod(podC, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningWith(podC, "WIDGET_IDS=w2", "widget w2", "chardev /dev/widget-w2")

	// The plugin restarted registers again.
	plugin.stop(t)
	waitCounts("plugin gone: widgets unhealthy", 3, 0)
	plugin = startWidgets(t, bin, pluginDir, stateDir)
	waitCounts("plugin back: widgets healthy", 3, 3)

	// A widget marked unhealthy lowers allocatable.
	if err := os.WriteFile(filepath.Join(stateDir, "unhealthy"), []byte("w2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitCounts("w2 unhealthy", 3, 2)
}
