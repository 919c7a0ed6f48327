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
// window.
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
	addr := freeAddr()
	manifests, status := filepath.Join(dir, "manifests"), filepath.Join(dir, "status.json")
	check(os.Mkdir(manifests, 0o755))
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	check(err)
	cmd := exec.Command(bin, "--manifests", manifests, "--root", filepath.Join(dir, "root"), "--node-name", "n1",
		"--push-addr", addr, "--status-file", status, "--healthz-port", "0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	check(cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	c := &client{base: "http://" + addr, status: status}
	deadline := time.Now().Add(30 * time.Second)
	for c.do(http.MethodGet, "/", nil) != nil {
		if time.Now().After(deadline) {
			fail("the agent's push source did not answer within 30 s (log: %s)", logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	fresh := idleWindow(pid, "fresh (no pod yet)")
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
			idleWindow(pid, fmt.Sprintf("after %d pods", done))
		}
	}
	fmt.Printf("%d pods in %s\n", *pods, time.Since(start).Round(time.Second))
	last := idleWindow(pid, fmt.Sprintf("after %d pods", *pods))
	fmt.Printf("over the fresh agent after %d pods: mean RSS %+.1f MB (anonymous %+.1f, file %+.1f), largest RSS %+.1f MB\n", *pods,
		mbDiff(last.mean.RSS, fresh.mean.RSS), mbDiff(last.mean.Anon, fresh.mean.Anon), mbDiff(last.mean.File, fresh.mean.File),
		mbDiff(last.max.RSS, fresh.max.RSS))
}

// window is an idle window's readings: their mean and the largest.
type window struct{ mean, max mem }

// idleWindow reads the agent's memory every 10 s from 10 s to 130 s from
// now, prints each reading and the window's mean and largest, and returns
// them.
func idleWindow(pid int, label string) window {
	begin := time.Now()
	var sum, peak mem
	n := uint64(0)
	for idle := 10 * time.Second; idle <= 130*time.Second; idle += 10 * time.Second {
		time.Sleep(time.Until(begin.Add(idle)))
		m := readMem(pid)
		fmt.Printf("  %s, idle %3.0f s: %v\n", label, idle.Seconds(), m)
		sum.RSS, sum.Anon, sum.File, sum.Threads = sum.RSS+m.RSS, sum.Anon+m.Anon, sum.File+m.File, sum.Threads+m.Threads
		if m.RSS > peak.RSS {
			peak = m
		}
		n++
	}
	w := window{mean: mem{RSS: sum.RSS / n, Anon: sum.Anon / n, File: sum.File / n, Threads: sum.Threads / n}, max: peak}
	fmt.Printf("%s: mean %v; largest RSS %.1f MB\n", label, w.mean, float64(peak.RSS)/(1<<20))
	return w
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
