package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The floor runs in a child process (this program started with
// -floor-child) so that its CPU time and memory are its own, not mixed with
// the parent's polling. The protocol on its stdin/stdout:
//
//	child: "ready"       connected to the runtime (a Version call made)
//	parent: "go"         start the pods now (t0)
//	child: "done <errors>" every StartContainer returned
//	parent closes stdin: the child exits
type floorOptions struct {
	endpoint, pauseImage, image string
	pods                        int
	prefix                      string
	logDir                      string
}

// floorChild is the child's main.
func floorChild(ctx context.Context, o floorOptions, in io.Reader, out io.Writer) error {
	c, err := dialCRI(ctx, o.endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	if !sc.Scan() || sc.Text() != "go" {
		return errors.New("floor child: no \"go\" on stdin")
	}
	// One worker per pod, as nodekit's pod workers: each issues its pod's
	// three calls in order.
	errs := make([]error, o.pods)
	var wg sync.WaitGroup
	for i := range o.pods {
		wg.Go(func() { errs[i] = floorPod(ctx, c, o, i) })
	}
	wg.Wait()
	failed := 0
	var first error
	for _, e := range errs {
		if e != nil {
			failed++
			if first == nil {
				first = e
			}
		}
	}
	if first != nil {
		fmt.Fprintf(out, "done %d %s\n", failed, strings.ReplaceAll(first.Error(), "\n", " "))
	} else {
		fmt.Fprintln(out, "done 0")
	}
	_, _ = io.Copy(io.Discard, in) // until the parent closes stdin
	return nil
}

// floorPod starts one pod with the minimal CRI calls, configured as nodekit
// configures a host-network static pod (labels, log paths, host network),
// without anything optional (DNS config, resources, security context).
func floorPod(ctx context.Context, c *cri, o floorOptions, i int) error {
	name := fmt.Sprintf("%s-%03d", o.prefix, i)
	uid := newUID()
	labels := map[string]string{labelPodNS: namespace, labelPodName: name, labelPodUID: uid}
	logDir := filepath.Join(o.logDir, name)
	if err := os.MkdirAll(filepath.Join(logDir, "main"), 0o755); err != nil {
		return err
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Labels:       labels,
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return fmt.Errorf("%s: RunPodSandbox: %w", name, err)
	}
	ctrLabels := map[string]string{labelPodNS: namespace, labelPodName: name, labelPodUID: uid, labelCtrName: "main"}
	cc, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: o.image},
			Command:  containerCommand(""),
			Labels:   ctrLabels,
			LogPath:  "main/0.log",
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER},
			}},
		},
		SandboxConfig: sbCfg,
	})
	if err != nil {
		return fmt.Errorf("%s: CreateContainer: %w", name, err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		return fmt.Errorf("%s: StartContainer: %w", name, err)
	}
	return nil
}

func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// floorRun is one floor measurement, seen from the parent.
type floorRun struct {
	toRunning time.Duration
	cpu       time.Duration // the child's CPU from "go" to all running
	hwm       int64
}

// runFloor starts the child, gives it t0 and measures until n containers run.
func runFloor(ctx context.Context, o options, c *cri, n int, work string) (floorRun, error) {
	var m floorRun
	self, err := os.Executable()
	if err != nil {
		return m, err
	}
	cmd := exec.CommandContext(ctx, self, "-floor-child",
		"-endpoint", o.endpoint, "-pause-image", o.pauseImage, "-image", o.image,
		"-floor-pods", strconv.Itoa(n), "-floor-prefix", fmt.Sprintf("floor%d", n), "-floor-logs", filepath.Join(work, "logs"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return m, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return m, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return m, err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		return m, fmt.Errorf("floor child did not get ready: %q %v", lines.Text(), lines.Err())
	}
	pid := cmd.Process.Pid
	cpu0, err := procCPU(pid)
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return m, err
	}
	done := make(chan string, 1)
	go func() {
		if lines.Scan() {
			done <- lines.Text()
		}
		close(done)
	}()
	tRun, err := c.waitRunning(ctx, n, o.poll, o.timeout)
	if err != nil {
		select {
		case msg := <-done:
			return m, fmt.Errorf("%w (floor child: %s)", err, msg)
		case <-time.After(time.Second):
		}
		return m, err
	}
	m.toRunning = tRun.Sub(t0)
	cpu1, err := procCPU(pid)
	if err != nil {
		return m, err
	}
	m.cpu = cpu1 - cpu0
	if m.hwm, err = procHWM(pid); err != nil {
		return m, err
	}
	if msg := <-done; msg != "done 0" {
		return m, fmt.Errorf("floor child: %s", msg)
	}
	return m, nil
}
