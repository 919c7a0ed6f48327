// Command churn measures the idle RSS of examples/standalone (the fake
// runtime, as a new user runs it) before and after churning pods through
// it (issue 29), the way the issue first saw the growth: pods pushed in
// batches, waited Running in the status file, deleted, waited gone.
//
//	go run ./hack/churn -pods 10000
//
// Each pod is the soak's (hack/soak): an init container, a main container
// with exec readiness and liveness probes (period 1 s) and an emptyDir,
// and on every third pod a sidecar that exits at once (a crash loop). The
// agent's VmRSS, RssAnon and RssFile are read from /proc every 10 s over
// three idle windows of 10-130 s: after start, before the first pod
// (fresh); after the warm-up batches; and after the last pod is gone. An
// idle Go program's RSS is not one figure: garbage piles up to the heap
// goal between collections (a fresh agent goes from 21 to 24 MB in its
// first 4 minutes with no pod), so each window reports the mean and the
// largest reading, and the agent is compared with itself fresh window by
// window. A second agent, the control, starts with it and is given no
// pod (-control=false: none); it is read in the same windows, so the
// churned agent is also compared with an agent of the same age that ran
// nothing (an idle agent's RSS creeps up over its first minutes: 21.1 to
// 22.3 MB in 15 minutes on 2026-11-27).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/internal/procmem"
)

func main() {
	pods := flag.Int("pods", 2000, "pods to churn")
	batch := flag.Int("batch", 20, "pods pushed and deleted together")
	warm := flag.Int("warm", 1000, "pods after which a warm reading is taken (0: none)")
	binary := flag.String("binary", "", "examples/standalone binary to run (default: built from this checkout)")
	withControl := flag.Bool("control", true, "also run a control agent, started with the churned one and given no pod, read in the same windows")
	flag.Parse()
	if *batch <= 0 || *pods <= 0 || *pods%*batch != 0 {
		fail("-pods %d must be a positive multiple of -batch %d", *pods, *batch)
	}
	dir, err := os.MkdirTemp("", "nodekit-churn-")
	check(err)
	defer os.RemoveAll(dir)
	bin := *binary
	if bin == "" {
		bin = filepath.Join(dir, "standalone")
		out, err := exec.Command("go", "build", "-o", bin, "./examples/standalone").CombinedOutput()
		if err != nil {
			fail("building examples/standalone: %v\n%s", err, out)
		}
	}
	pid, c, stop := startAgent(bin, filepath.Join(dir, "churned"))
	defer stop()
	var control int
	if *withControl {
		var stopControl func()
		control, _, stopControl = startAgent(bin, filepath.Join(dir, "control"))
		defer stopControl()
	}
	fresh, _ := idleWindow(pid, control, "fresh (no pod yet)")
	start := time.Now()
	for n := 0; n < *pods; n += *batch {
		var items []any
		names := make([]string, 0, *batch)
		for i := range *batch {
			items = append(items, pod(n+i))
			names = append(names, fmt.Sprintf("p%d-n1", n+i))
		}
		check(c.do(http.MethodPost, "/", map[string]any{"apiVersion": "v1", "kind": "PodList", "items": items}))
		c.waitFor(names, func(st map[string]string) bool {
			for _, n := range names {
				if st[n] != "Running" {
					return false
				}
			}
			return true
		})
		for i := range *batch {
			check(c.do(http.MethodDelete, fmt.Sprintf("/default/p%d", n+i), nil))
		}
		c.waitFor(names, func(st map[string]string) bool { return len(st) == 0 })
		if done := n + *batch; done == *warm && done < *pods {
			idleWindow(pid, control, fmt.Sprintf("after %d pods", done))
		}
	}
	fmt.Printf("%d pods in %s\n", *pods, time.Since(start).Round(time.Second))
	last, ctl := idleWindow(pid, control, fmt.Sprintf("after %d pods", *pods))
	fmt.Printf("over the fresh agent after %d pods: mean RSS %+.1f MB (anonymous %+.1f, file %+.1f), largest RSS %+.1f MB\n", *pods,
		mbDiff(last.mean.RSS, fresh.mean.RSS), mbDiff(last.mean.Anon, fresh.mean.Anon), mbDiff(last.mean.File, fresh.mean.File),
		mbDiff(last.max.RSS, fresh.max.RSS))
	if control != 0 {
		fmt.Printf("over the control agent (started with it, no pod), same window: mean RSS %+.1f MB (anonymous %+.1f, file %+.1f), largest RSS %+.1f MB\n",
			mbDiff(last.mean.RSS, ctl.mean.RSS), mbDiff(last.mean.Anon, ctl.mean.Anon), mbDiff(last.mean.File, ctl.mean.File),
			mbDiff(last.max.RSS, ctl.max.RSS))
	}
}

// startAgent starts examples/standalone with its files under dir and
// returns its pid, a client of its push source and status file, once the
// push source answers, and a func that stops it (SIGTERM, then wait).
func startAgent(bin, dir string) (int, *client, func()) {
	addr := freeAddr()
	manifests, status := filepath.Join(dir, "manifests"), filepath.Join(dir, "status.json")
	check(os.MkdirAll(manifests, 0o755))
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	check(err)
	cmd := exec.Command(bin, "--manifests", manifests, "--root", filepath.Join(dir, "root"), "--node-name", "n1",
		"--push-addr", addr, "--status-file", status, "--healthz-port", "0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	check(cmd.Start())
	c := &client{base: "http://" + addr, status: status}
	deadline := time.Now().Add(30 * time.Second)
	for c.do(http.MethodGet, "/", nil) != nil {
		if time.Now().After(deadline) {
			fail("the agent's push source did not answer within 30 s (log: %s)", logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cmd.Process.Pid, c, func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
}

// window is an idle window's readings: their mean and the largest.
type window struct{ mean, max mem }

// idleWindow reads the agent's memory (and the control agent's, when
// control is not 0) every 10 s from 10 s to 130 s from now, prints each
// reading and the window's mean and largest, and returns them.
func idleWindow(pid, control int, label string) (window, window) {
	begin := time.Now()
	var w, ctl windowSum
	for idle := 10 * time.Second; idle <= 130*time.Second; idle += 10 * time.Second {
		time.Sleep(time.Until(begin.Add(idle)))
		m := readMem(pid)
		w.add(m)
		if control != 0 {
			cm := readMem(control)
			ctl.add(cm)
			fmt.Printf("  %s, idle %3.0f s: %v; control %v\n", label, idle.Seconds(), m, cm)
		} else {
			fmt.Printf("  %s, idle %3.0f s: %v\n", label, idle.Seconds(), m)
		}
	}
	r := w.window()
	fmt.Printf("%s: mean %v; largest RSS %.1f MB\n", label, r.mean, float64(r.max.RSS)/(1<<20))
	if control == 0 {
		return r, window{}
	}
	c := ctl.window()
	fmt.Printf("%s, control: mean %v; largest RSS %.1f MB\n", label, c.mean, float64(c.max.RSS)/(1<<20))
	return r, c
}

// windowSum adds up a window's readings.
type windowSum struct {
	sum, peak mem
	n         uint64
}

func (s *windowSum) add(m mem) {
	s.sum.RSS, s.sum.Anon, s.sum.File, s.sum.Threads = s.sum.RSS+m.RSS, s.sum.Anon+m.Anon, s.sum.File+m.File, s.sum.Threads+m.Threads
	if m.RSS > s.peak.RSS {
		s.peak = m
	}
	s.n++
}

func (s *windowSum) window() window {
	n := max(s.n, 1)
	return window{mean: mem{RSS: s.sum.RSS / n, Anon: s.sum.Anon / n, File: s.sum.File / n, Threads: s.sum.Threads / n}, max: s.peak}
}

// pod is the n-th pod, as hack/soak's soakPod.
func pod(n int) map[string]any {
	probe := map[string]any{"exec": map[string]any{"command": []string{"true"}}, "periodSeconds": 1}
	containers := []any{map[string]any{"name": "main", "image": "busybox:1", "command": []string{"sleep", "3600"},
		"readinessProbe": probe, "livenessProbe": probe,
		"volumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}}}}
	if n%3 == 0 {
		containers = append(containers, map[string]any{"name": "sidecar", "image": "busybox:1", "command": []string{"false"}})
	}
	name := fmt.Sprintf("p%d", n)
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"spec": map[string]any{"terminationGracePeriodSeconds": 1,
			"initContainers": []any{map[string]any{"name": "init", "image": "busybox:1", "command": []string{"true"}}},
			"containers":     containers,
			"volumes":        []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}}}}
}

type client struct {
	base, status string
	http         http.Client
}

func (c *client) do(method, path string, body any) error {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

// waitFor polls the status file (the agent rewrites it within a second of
// a change) until cond holds for the pods' phases, for at most 5 minutes.
func (c *client) waitFor(names []string, cond func(map[string]string) bool) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		st := map[string]string{}
		if b, err := os.ReadFile(c.status); err == nil {
			var reports []struct{ Name, Phase string }
			if json.Unmarshal(b, &reports) == nil {
				for _, r := range reports {
					st[r.Name] = r.Phase
				}
			}
		}
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			fail("pods %s..%s: not there within 5 minutes: %v", names[0], names[len(names)-1], st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type mem procmem.Status

func (m mem) String() string {
	return fmt.Sprintf("RSS %.1f MB (anonymous %.1f, file %.1f), %d threads",
		float64(m.RSS)/(1<<20), float64(m.Anon)/(1<<20), float64(m.File)/(1<<20), m.Threads)
}

func mbDiff(a, b uint64) float64 { return (float64(a) - float64(b)) / (1 << 20) }

func readMem(pid int) mem {
	st, err := procmem.Read(pid)
	check(err)
	return mem(st)
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().String()
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "churn: "+format+"\n", args...)
	os.Exit(1)
}
