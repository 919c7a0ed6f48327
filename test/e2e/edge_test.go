//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// edgeScript runs a hack script (containerd.sh or kube-apiserver.sh) with
// the test environment's directories.
func edgeScript(t *testing.T, script, cmd string) {
	t.Helper()
	c := exec.Command("bash", filepath.Join("..", "..", "hack", script), cmd)
	c.Env = os.Environ()
	if os.Getenv("NODEKIT_APISERVER_DIR") == "" {
		c.Env = append(c.Env, "NODEKIT_APISERVER_DIR="+filepath.Dir(os.Getenv("NODEKIT_NODE_KUBECONFIG")))
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/%s %s: %v\n%s", script, cmd, err, out)
	}
	t.Logf("hack/%s %s: %s", script, cmd, strings.TrimSpace(string(out)))
}

// edgeAgent is the examples/edge binary running as a child process.
type edgeAgent struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startEdgeAgent(t *testing.T, bin string, args []string, logPath string) *edgeAgent {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n===== agent start %s =====\n", time.Now().Format(time.RFC3339Nano))
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = f, f
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	a := &edgeAgent{cmd: c, log: f, done: make(chan struct{})}
	go func() { _ = c.Wait(); close(a.done) }()
	return a
}

// kill stops the agent the hard way (SIGKILL: a crash or power loss).
func (a *edgeAgent) kill(t *testing.T) {
	t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not die within 30s of SIGKILL")
	}
	a.log.Close()
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first
// (a reboot empties the agent's tmpfs secret volumes).
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mps = append(mps, fields[4])
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", mp, err)
		}
	}
}

// TestEdgeRebootWithoutAPIServer runs the examples/edge agent on containerd
// joined to a real kube-apiserver with the node's credential:
//  1. three pods bound to the node run (one mounts a secret and a
//     configMap and reads a configMap key into its env, one has the default
//     service account token volume);
//  2. the agent is killed and the admin deletes one pod while the node is
//     away; the API server is stopped;
//  3. a reboot: every container is killed and removed, containerd restarts,
//     the agent's tmpfs mounts are gone;
//  4. the agent starts again on the same state dir with the API server
//     still down: the pods (the deleted one too: the node cannot know) run
//     again within 10s, the secret, configMaps and token served from disk;
//  5. the API server returns: the two remaining pods are not restarted (same
//     container IDs as after the reboot), their status in the API server
//     names those containers and is Running and Ready, the node lease is
//     renewed, and the pod deleted while the node was away is stopped and
//     its object removed.
func TestEdgeRebootWithoutAPIServer(t *testing.T) {
	ae := newAPIClients(t)
	name, nodeKC, adminKC := ae.name, ae.nodeKC, ae.adminKC
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if endpoint == "" || os.Getenv("NODEKIT_CONTAINERD_DIR") == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT and NODEKIT_CONTAINERD_DIR must be set: the test restarts containerd with `hack/containerd.sh restart`")
	}
	busybox := getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	admin := ae.admin
	ctx := t.Context()

	// The agent binary.
	work, err := os.MkdirTemp("", "nodekit-edge-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(work, "state")
	bin := filepath.Join(work, "edge")
	build := exec.Command("go", "build", "-o", bin, "./examples/edge")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/edge: %v\n%s", err, out)
	}
	logPath := filepath.Join(work, "agent.log")
	args := []string{"--kubeconfig", nodeKC, "--node-name", name, "--runtime-endpoint", endpoint,
		"--state-dir", state, "--status-every", "2s", "-v", "-q",
		// The node API on a port of its own (other agents may hold 10250).
		"--port", strconv.Itoa(freePort(t)), "--healthz-port", "0"}

	// connect retries while containerd's CRI service starts ("server is
	// not initialized yet" right after a restart).
	connect := func() *remote.Client {
		var cri *remote.Client
		nsPoll(t, 60*time.Second, "containerd's CRI service at "+endpoint, func() (bool, string) {
			c, err := remote.New(remote.Config{Endpoint: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Connect(ctx); err != nil {
				c.Close(ctx)
				return false, err.Error()
			}
			cri = c
			return true, ""
		})
		return cri
	}
	cri := connect()

	const keep, vols, gone = "edge-keep", "edge-volumes", "edge-gone"
	ours := map[string]bool{keep: true, vols: true, gone: true}
	var agent *edgeAgent
	apiDown := false
	t.Cleanup(func() {
		if agent != nil {
			select {
			case <-agent.done:
			default:
				agent.kill(t)
			}
		}
		if apiDown {
			edgeScript(t, "kube-apiserver.sh", "start-apiserver")
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for n := range ours {
			_ = admin.CoreV1().Pods("default").Delete(cctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		_ = admin.CoreV1().Secrets("default").Delete(cctx, "edge-creds", metav1.DeleteOptions{})
		_ = admin.CoreV1().ConfigMaps("default").Delete(cctx, "edge-config", metav1.DeleteOptions{})
		if sbs, err := cri.ListPodSandbox(cctx, nil); err == nil {
			for _, sb := range sbs {
				if ours[sb.GetMetadata().GetName()] {
					_ = cri.StopPodSandbox(cctx, sb.Id)
					_ = cri.RemovePodSandbox(cctx, sb.Id)
				}
			}
		}
		cri.Close(cctx)
		unmountUnder(t, state)
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("agent log (last 12 KiB):\n%s", tail(b, 12<<10))
			}
		}
		_ = os.RemoveAll(work)
	})

	// running maps each of our pods to the ID of its running container.
	running := func() map[string]string {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := cri.ListContainers(cctx, &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		out := map[string]string{}
		for _, c := range cs {
			if n := c.GetLabels()[kuberuntime.LabelPodName]; ours[n] {
				out[n] = c.Id
			}
		}
		return out
	}

	// Leftovers of an interrupted run.
	for n := range ours {
		_ = admin.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		nsPoll(t, 30*time.Second, "leftover pod "+n+" gone", func() (bool, string) {
			_, err := admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	_ = admin.CoreV1().Secrets("default").Delete(ctx, "edge-creds", metav1.DeleteOptions{})
	_ = admin.CoreV1().ConfigMaps("default").Delete(ctx, "edge-config", metav1.DeleteOptions{})
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-creds", Namespace: "default"},
		Data:       map[string][]byte{"password": []byte("s3cret-edge")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-config", Namespace: "default"},
		Data:       map[string]string{"mode": "offline-ok", "motd": "hello from the config"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The API server's CA for the service account token volume (the
	// controller manager, which would publish it, does not run here).
	if _, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"},
			Data:       map[string]string{"ca.crt": "not a real CA: a stand-in for the e2e test\n"},
		}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	agent = startEdgeAgent(t, bin, args, logPath)

	mkPod := func(podName string, withVolumes bool) *v1.Pod {
		p := boundPod(podName, name, 2, "", sleeper("main", busybox))
		if podName == keep {
			// The default service account token volume (kube-api-access-*):
			// its token is served from disk after the reboot.
			p.Spec.AutomountServiceAccountToken = nil
		}
		if withVolumes {
			c := &p.Spec.Containers[0]
			// Fails (and crash-loops) unless both volumes are there.
			c.Command = []string{"sh", "-c", "test -s /creds/password && test -s /config/motd || exit 3; trap 'exit 0' TERM; sleep 3600 & wait"}
			c.VolumeMounts = []v1.VolumeMount{{Name: "creds", MountPath: "/creds"}, {Name: "config", MountPath: "/config"}}
			c.Env = []v1.EnvVar{{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "edge-config"}, Key: "mode"}}}}
			p.Spec.Volumes = []v1.Volume{
				{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "edge-creds"}}},
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "edge-config"}}}},
			}
		}
		return p
	}
	for _, p := range []*v1.Pod{mkPod(keep, false), mkPod(vols, true), mkPod(gone, false)} {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podRunningIn := func(c kubernetes.Interface, podName, containerID string) (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := condition(p.Status, v1.PodReady) == v1.ConditionTrue
		id := ""
		if len(p.Status.ContainerStatuses) == 1 {
			id = p.Status.ContainerStatuses[0].ContainerID
		}
		ok := p.Status.Phase == v1.PodRunning && ready && (containerID == "" || strings.HasSuffix(id, "://"+containerID))
		return ok, fmt.Sprintf("%s: phase %q ready %v container %q (want %q)", podName, p.Status.Phase, ready, id, containerID)
	}
	nsPoll(t, 120*time.Second, "the three pods Running in the API server and on containerd", func() (bool, string) {
		r := running()
		var states []string
		all := len(r) == 3
		for n := range ours {
			ok, s := podRunningIn(admin, n, r[n])
			all = all && ok
			states = append(states, s)
		}
		return all, strings.Join(states, "; ")
	})
	// The stored copies exist before the outage.
	for _, f := range []string{"checkpoints/podconfig-api.json", "objects/secrets/default_edge-creds", "objects/configmaps/default_edge-config"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Fatalf("not stored on disk: %v", err)
		}
	}

	// The node goes away (agent killed), one pod is deleted meanwhile, the
	// API server stops.
	agent.kill(t)
	if err := admin.CoreV1().Pods("default").Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	edgeScript(t, "kube-apiserver.sh", "stop-apiserver")
	apiDown = true

	// The reboot.
	edgeScript(t, "containerd.sh", "restart")
	unmountUnder(t, state)
	cri.Close(ctx)
	cri = connect()
	if r := running(); len(r) != 0 {
		t.Fatalf("containers survived the reboot: %v", r)
	}

	// The agent comes back without its API server.
	started := time.Now()
	agent = startEdgeAgent(t, bin, args, logPath)
	var afterReboot map[string]string
	nsPollDur(t, 10*time.Second, "the pods running again within 10s with the API server down", func() (bool, string) {
		afterReboot = running()
		return len(afterReboot) == 3, fmt.Sprint(afterReboot)
	})
	t.Logf("pods running again %v after the agent started", time.Since(started).Round(10*time.Millisecond))
	// The volume pod sees the secret and configMap from the stored copies.
	for _, check := range []struct{ cmd, want string }{
		{"cat /creds/password", "s3cret-edge"},
		{"cat /config/motd", "hello from the config"},
		{"echo $MODE", "offline-ok"},
		{"keep: test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token", "token"},
	} {
		pod, cmd := vols, check.cmd
		if rest, ok := strings.CutPrefix(cmd, "keep: "); ok {
			pod, cmd = keep, rest
		}
		stdout, stderr, err := cri.ExecSync(ctx, afterReboot[pod], []string{"sh", "-c", cmd}, 10*time.Second)
		if err != nil || strings.TrimSpace(string(stdout)) != check.want {
			t.Fatalf("%s in %s: %q %q %v, want %q", cmd, pod, stdout, stderr, err, check.want)
		}
	}

	// The API server returns.
	edgeScript(t, "kube-apiserver.sh", "start-apiserver")
	apiDown = false
	back := time.Now()
	admin = nsClient(t, adminKC)
	nsPoll(t, 120*time.Second, "pod deleted while away stopped and its object removed", func() (bool, string) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, gone, metav1.GetOptions{})
		r := running()
		_, stillRunning := r[gone]
		return apierrors.IsNotFound(err) && !stillRunning, fmt.Sprintf("object: %v, running: %v", err, r)
	})
	nsPoll(t, 120*time.Second, "status in the API server names the containers started after the reboot", func() (bool, string) {
		var states []string
		all := true
		for _, n := range []string{keep, vols} {
			ok, s := podRunningIn(admin, n, afterReboot[n])
			all = all && ok
			states = append(states, s)
		}
		return all, strings.Join(states, "; ")
	})
	nsPoll(t, 60*time.Second, "node lease renewed after the API server returned", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renew time"
		}
		return l.Spec.RenewTime.After(back), fmt.Sprintf("renewed %v, API server back %v", l.Spec.RenewTime.Time, back)
	})
	// Nothing was restarted on reconnect: the containers started after the
	// reboot are still the running ones.
	now := running()
	for _, n := range []string{keep, vols} {
		if now[n] != afterReboot[n] {
			t.Errorf("%s restarted on reconnect: container %s, was %s", n, now[n], afterReboot[n])
		}
	}
	// The stored pod set follows the API server.
	data, err := os.ReadFile(filepath.Join(state, "checkpoints", "podconfig-api.json"))
	if err != nil || bytes.Contains(data, []byte(`"name":"`+gone+`"`)) || !bytes.Contains(data, []byte(`"name":"`+keep+`"`)) {
		t.Errorf("stored pod set after reconnect (err %v) still has %s or lacks %s", err, gone, keep)
	}
}
