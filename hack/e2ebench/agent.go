package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// containerScript is the pods' container. It exits 0 on SIGTERM (the trap
// makes the agent's stop quick) or once something writes to and closes its
// FIFO stopFIFO (cat gets EOF): the exit-visibility case makes containers
// exit that way, from the host through /proc/<pid>/root, with no exec and
// no signal. Waiting costs nothing (cat blocks in open).
const containerScript = `trap "exit 0" TERM; mkfifo ` + stopFIFO + `; cat ` + stopFIFO + ` >/dev/null & wait`

// stopFIFO is the FIFO in the container's root file system.
const stopFIFO = "/e2ebench-stop"

func containerCommand(string) []string { return []string{"sh", "-c", containerScript} }

// manifest is a host-network static pod running containerScript.
func manifest(name, image, restartPolicy string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", %q]
    resources:
      requests:
        cpu: 5m
        memory: 8Mi
`, name, namespace, restartPolicy, image, containerScript)
}

// stageManifests writes n manifests into a staging directory beside dir;
// publish moves them into dir (renames: the agent never reads a partial
// file).
func stageManifests(dir, prefix, image, restartPolicy string, n int) (publish func() error, names []string, err error) {
	stage := dir + ".stage"
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		if err := os.WriteFile(filepath.Join(stage, name+".yaml"), []byte(manifest(name, image, restartPolicy)), 0o644); err != nil {
			return nil, nil, err
		}
		names = append(names, name)
	}
	publish = func() error {
		for _, name := range names {
			if err := os.Rename(filepath.Join(stage, name+".yaml"), filepath.Join(dir, name+".yaml")); err != nil {
				return err
			}
		}
		return nil
	}
	return publish, names, nil
}

// buildStandalone builds examples/standalone as footprint does (static,
// stripped) and returns its path and size.
func buildStandalone(ctx context.Context, work string) (string, int64, error) {
	bin := filepath.Join(work, "standalone")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./examples/standalone")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("go build ./examples/standalone (run from the repository root): %w", err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", 0, err
	}
	return bin, fi.Size(), nil
}

// agentProc is a running examples/standalone (or kubelet).
type agentProc struct {
	name       string // for messages: "standalone", "kubelet"
	anyExit    bool   // stop: any exit after SIGTERM is clean (the kubelet's status is not 0)
	cmd        *exec.Cmd
	exited     chan error
	logPath    string
	manifests  string
	statusLog  string
	statusFile string
}

// startAgent starts the binary on the runtime with an empty manifest
// directory and returns once it is ready: its status file is written, or,
// without statusOutputs (no --status-file or --status-log, the standalone's
// defaults), it printed its first table, after the agent's first sync.
func startAgent(ctx context.Context, o options, bin, work string, statusOutputs bool, extra ...string) (*agentProc, error) {
	a := &agentProc{
		name:       "standalone",
		logPath:    filepath.Join(work, "standalone.log"),
		manifests:  filepath.Join(work, "manifests"),
		statusLog:  filepath.Join(work, "status.log"),
		statusFile: filepath.Join(work, "status.json"),
		exited:     make(chan error, 1),
	}
	if err := os.MkdirAll(a.manifests, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(a.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := []string{
		"--runtime-endpoint", o.endpoint,
		"--manifests", a.manifests,
		"--root", filepath.Join(work, "root"),
		"--node-name", "e2ebench",
		// A bound on its life should this program die without stopping it.
		"--duration", (2*o.timeout + o.idleWindow + 5*time.Minute).String(),
	}
	if statusOutputs {
		args = append(args, "--status-file", a.statusFile, "--status-log", a.statusLog)
	}
	args = append(append(args, extra...), o.agentFlags...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { a.exited <- a.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if statusOutputs {
			if _, err := os.Stat(a.statusFile); err == nil {
				return a, nil
			}
		} else if out, err := os.ReadFile(a.logPath); err == nil && bytes.Contains(out, []byte(firstTable)) {
			return a, nil
		}
		select {
		case <-ctx.Done():
			a.kill()
			return nil, ctx.Err()
		case err := <-a.exited:
			a.exited <- err
			return nil, a.fail(fmt.Errorf("%s exited while starting: %v", a.name, err))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.kill()
			return nil, a.fail(errors.New("standalone not ready after 30s"))
		}
	}
}

// firstTable is what the standalone prints once it is ready, before any
// manifest was written (its table without pods).
const firstTable = "(no pods yet)"

func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// alive fails if the agent exited.
func (a *agentProc) alive() error {
	select {
	case err := <-a.exited:
		a.exited <- err
		return a.fail(fmt.Errorf("%s exited: %v", a.name, err))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for the exit.
func (a *agentProc) stop() error {
	if err := a.alive(); err != nil {
		return err
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.exited:
		a.exited <- err
		if err != nil && !a.anyExit {
			return a.fail(fmt.Errorf("%s did not exit cleanly on SIGTERM: %v", a.name, err))
		}
		return nil
	case <-time.After(20 * time.Second):
		a.kill()
		return a.fail(fmt.Errorf("%s did not exit within 20s of SIGTERM", a.name))
	}
}

func (a *agentProc) kill() {
	select {
	case err := <-a.exited:
		a.exited <- err
	default:
		_ = a.cmd.Process.Kill()
		a.exited <- <-a.exited
	}
}

func (a *agentProc) fail(err error) error {
	return fmt.Errorf("%w\n--- %s log (tail) ---\n%s", err, a.name, tail(a.logPath, 20))
}

// removeManifests deletes every manifest (the agent stops the pods).
func (a *agentProc) removeManifests() error {
	ents, err := os.ReadDir(a.manifests)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(a.manifests, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
