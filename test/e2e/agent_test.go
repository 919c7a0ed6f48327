//go:build e2e

// Package e2e runs the standalone example agent (examples/standalone) as a
// subprocess against a real containerd and checks what it does to real
// containers. Start containerd first:
//
//	NODEKIT_CONTAINERD_DIR=/tmp/nkc bash hack/containerd.sh start
//	set -a; . /tmp/nkc/env; set +a
//	go test -tags e2e -count=1 ./test/e2e/
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

const (
	nodeName = "e2e-node"
	numPods  = 30
	grace    = 5 // terminationGracePeriodSeconds of the test pods
)

// env holds what every test needs: the CRI endpoint, the images and the
// agent binary (built once).
type env struct {
	endpoint string
	busybox  string
	binary   string
	cri      *remote.Client
}

func setup(t *testing.T) *env {
	t.Helper()
	e := volumeEnv(t)

	e.binary = filepath.Join(t.TempDir(), "standalone")
	build := exec.Command("go", "build", "-o", e.binary, "../../examples/standalone")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/standalone: %v\n%s", err, out)
	}
	return e
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// agentProc is one run of the standalone binary.
type agentProc struct {
	cmd        *exec.Cmd
	statusFile string
	logFile    string
	exited     chan struct{}
}

func (e *env) start(t *testing.T, root, manifests, name string) *agentProc {
	t.Helper()
	p := &agentProc{
		statusFile: filepath.Join(root, name+"-status.json"),
		logFile:    filepath.Join(root, name+".log"),
		exited:     make(chan struct{}),
	}
	log, err := os.Create(p.logFile)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(e.binary,
		"--manifests", manifests, "--runtime-endpoint", e.endpoint, "--root", root,
		"--node-name", nodeName, "--status-file", p.statusFile, "-v")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Killed with the test binary too (a test that hits -timeout is
	// killed without its cleanups).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		p.cmd.Wait()
		log.Close()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			data, _ := os.ReadFile(p.logFile)
			t.Logf("agent %s log (last 4 KiB):\n%s", name, tail(data, 4096))
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// PodReport mirrors the standalone example's status file.
type PodReport struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Phase      string `json:"phase"`
	Ready      string `json:"ready"`
	Restarts   int32  `json:"restarts"`
	Containers []struct {
		Name         string `json:"name"`
		ContainerID  string `json:"containerID"`
		State        string `json:"state"`
		RestartCount int32  `json:"restartCount"`
	} `json:"containers"`
}

func (p *agentProc) status() map[string]PodReport {
	data, err := os.ReadFile(p.statusFile)
	if err != nil {
		return nil
	}
	var pods []PodReport
	if json.Unmarshal(data, &pods) != nil {
		return nil
	}
	out := map[string]PodReport{}
	for _, r := range pods {
		out[r.Name] = r
	}
	return out
}

// running lists the running containers of the test's pods, by pod name.
func (e *env) running(t *testing.T) map[string]*runtimeapi.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := e.cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	out := map[string]*runtimeapi.Container{}
	for _, c := range cs {
		name := c.GetLabels()[kuberuntime.LabelPodName]
		if strings.HasSuffix(name, "-"+nodeName) {
			if old, dup := out[name]; dup {
				t.Errorf("pod %s has two running containers: %s and %s", name, old.Id, c.Id)
			}
			out[name] = c
		}
	}
	return out
}

// waitFor polls cond every 250ms until it holds or timeout passes (then
// it checks once more before failing), and returns how long it took.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	expired := false
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		if expired {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		}
		select {
		case <-deadline.C:
			expired = true
		case <-tick.C:
		}
	}
}

func podName(i int) string { return fmt.Sprintf("sleeper-%02d", i) }

// trapTerm stops at once on SIGTERM; ignoreTerm (sleep as PID 1) ignores it
// and is killed when the grace period ends.
const (
	trapTerm   = `["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]`
	ignoreTerm = `["sleep", "3600"]`
)

func manifest(name, image, version string) string {
	return manifestCmd(name, image, version, trapTerm)
}

func manifestCmd(name, image, version, command string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: %d
  containers:
  - name: main
    image: %s
    command: %s
    env:
    - name: VERSION
      value: "%s"
`, name, grace, image, command, version)
}

func writeManifest(t *testing.T, dir, name, content string) {
	t.Helper()
	// Write beside and rename, so the agent never reads half a file.
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// containerPID reads a container's host PID from containerd's verbose status.
func (e *env) containerPID(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.cri.ContainerStatus(ctx, id, true)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		t.Fatalf("no pid in the verbose status of %s (%v): %v", id, err, resp.GetInfo())
	}
	return info.Pid
}

// cleanup stops and removes every sandbox of the test's pods through CRI.
func (e *env) cleanup(t *testing.T) {
	removeSandboxes(t, e.cri, func(m *runtimeapi.PodSandboxMetadata) bool {
		return strings.HasSuffix(m.GetName(), "-"+nodeName)
	})
}

// TestAgent drives one agent through the life of 30 static pods: start,
// edit, delete, a killed container, and a killed and restarted agent.
func TestAgent(t *testing.T) {
	e := setup(t)
	e.cleanup(t) // leftovers of an earlier, interrupted run
	t.Cleanup(func() { e.cleanup(t) })
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range numPods - 1 {
		writeManifest(t, manifests, podName(i), manifest(podName(i), e.busybox, "1"))
	}
	// The last pod ignores SIGTERM: deleting it shows the grace period.
	writeManifest(t, manifests, podName(numPods-1), manifestCmd(podName(numPods-1), e.busybox, "1", ignoreTerm))
	top := t // agents live until the end of the whole test, not of a subtest
	agent := e.start(top, root, manifests, "agent1")
	full := func(i int) string { return podName(i) + "-" + nodeName }

	// 1. All 30 pods run, as containerd and the agent's status both say.
	took := waitFor(t, 90*time.Second, "30 running pods", func() (bool, string) {
		run := e.running(t)
		st := agent.status()
		ready := 0
		for _, r := range st {
			if r.Phase == "Running" && r.Ready == "1/1" {
				ready++
			}
		}
		return len(run) == numPods && ready == numPods,
			fmt.Sprintf("%d running in containerd, %d Running and ready in the status file", len(run), ready)
	})
	t.Logf("30 pods running after %v", took.Round(10*time.Millisecond))
	before := e.running(t)

	// 2. Editing one manifest restarts that pod only.
	t.Run("edit", func(t *testing.T) {
		writeManifest(t, manifests, podName(7), manifest(podName(7), e.busybox, "2"))
		// The edit gives the pod a new UID: the new pod waits until the old
		// one has stopped (static pod exclusion) and is then retried after
		// the pod workers' back-off (10s, +0-50% jitter), as the kubelet does.
		took := waitFor(t, 40*time.Second, "the edited pod's new container", func() (bool, string) {
			c := e.running(t)[full(7)]
			return c != nil && c.Id != before[full(7)].Id, "still the old container"
		})
		t.Logf("edited pod restarted after %v", took.Round(10*time.Millisecond))
		now := e.running(t)
		for i := range numPods {
			if i == 7 {
				continue
			}
			if now[full(i)] == nil || now[full(i)].Id != before[full(i)].Id {
				t.Errorf("pod %s: container changed although its manifest did not", full(i))
			}
		}
		before = now
	})

	// 3. Deleting a manifest stops the pod within its grace period: the pod
	// ignores SIGTERM, so it is killed when the grace period ends.
	t.Run("delete", func(t *testing.T) {
		if err := os.Remove(filepath.Join(manifests, podName(29)+".yaml")); err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, (grace+10)*time.Second, "the deleted pod to stop", func() (bool, string) {
			_, ok := e.running(t)[full(29)]
			return !ok, "its container still runs"
		})
		t.Logf("deleted pod stopped after %v (grace %ds)", took.Round(10*time.Millisecond), grace)
		if took < (grace-1)*time.Second {
			t.Errorf("the pod stopped after %v: its SIGTERM-ignoring container was not given its %ds grace", took, grace)
		}
		delete(before, full(29))
	})

	// 4. A killed container is restarted (restartPolicy Always) and its
	// restart count shows in the status.
	t.Run("container killed", func(t *testing.T) {
		victim := before[full(3)]
		pid := e.containerPID(t, victim.Id)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
		took := waitFor(t, 30*time.Second, "the killed container's replacement", func() (bool, string) {
			c := e.running(t)[full(3)]
			r := agent.status()[full(3)]
			return c != nil && c.Id != victim.Id && r.Restarts >= 1 && r.Phase == "Running",
				fmt.Sprintf("status restarts=%d phase=%s", r.Restarts, r.Phase)
		})
		t.Logf("killed container replaced after %v", took.Round(10*time.Millisecond))
		before = e.running(t)
		if got := before[full(3)].GetMetadata().GetAttempt(); got != 1 {
			t.Errorf("the replacement's attempt is %d, want 1", got)
		}
	})

	// 5. SIGKILL the agent and start another with the same root and
	// manifests: it takes the running containers over untouched.
	t.Run("agent restart", func(t *testing.T) {
		if err := agent.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-agent.exited
		agent = e.start(top, root, manifests, "agent2")
		waitFor(t, 60*time.Second, "the new agent to report every pod", func() (bool, string) {
			st := agent.status()
			ready := 0
			for _, r := range st {
				if r.Phase == "Running" && r.Ready == "1/1" {
					ready++
				}
			}
			return ready == numPods-1, fmt.Sprintf("%d pods Running and ready", ready)
		})
		if got := agent.status()[full(3)].Restarts; got != 1 {
			t.Errorf("pod %s: the new agent reports %d restarts, want 1", full(3), got)
		}
		time.Sleep(5 * time.Second) // let the new agent sync a few rounds
		now := e.running(t)
		if len(now) != len(before) {
			t.Errorf("%d containers run after the agent restart, %d before", len(now), len(before))
		}
		for name, c := range before {
			if now[name] == nil || now[name].Id != c.Id || now[name].GetMetadata().GetAttempt() != c.GetMetadata().GetAttempt() {
				t.Errorf("pod %s: container %s (attempt %d) was not left alone", name, c.Id, c.GetMetadata().GetAttempt())
			}
		}
	})

	// Clean up through the agent: remove every manifest and wait for the
	// pods to stop.
	entries, _ := os.ReadDir(manifests)
	for _, en := range entries {
		os.Remove(filepath.Join(manifests, en.Name()))
	}
	waitFor(t, (grace+20)*time.Second, "every pod to stop", func() (bool, string) {
		n := len(e.running(t))
		return n == 0, fmt.Sprintf("%d containers still run", n)
	})
	agent.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-agent.exited:
		if code := agent.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("the agent exited with %d after SIGTERM", code)
		}
	case <-time.After(30 * time.Second):
		t.Error("the agent did not exit within 30s of SIGTERM")
	}
}
