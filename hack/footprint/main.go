// Command footprint checks the footprint budgets of examples/standalone
// written in hack/footprint-budgets.txt:
//
//   - standalone_stripped_bytes: the size of the binary built with
//     go build -trimpath -ldflags='-s -w';
//   - standalone_rss_bytes_30_pods: its peak resident set (VmHWM) on the
//     in-memory fake runtime once 30 static pods are Running (and for a short
//     settle time after).
//
// It prints a table (measured, budget, target) and exits 1 when a measurement
// exceeds its budget, 2 when it could not measure. Run it from the repository
// root:
//
//	go run ./hack/footprint
//
// Linux only (it reads /proc/<pid>/status).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nodekit/nodekit/internal/procmem"
)

// Budget keys in the budgets file.
const (
	keyStripped       = "standalone_stripped_bytes"
	keyRSS            = "standalone_rss_bytes_30_pods"
	keyMinimal        = "minimal_stripped_bytes"
	targetPrefix      = "target_"
	defaultPods       = 30
	defaultBudgetFile = "hack/footprint-budgets.txt"
)

type options struct {
	budgets string
	pods    int
	runs    int
	timeout time.Duration
	settle  time.Duration
	keep    bool
	binary  string
}

func main() {
	var o options
	flag.StringVar(&o.budgets, "budgets", defaultBudgetFile, "budgets file (key value lines, bytes)")
	flag.IntVar(&o.pods, "pods", defaultPods, "static pods to run (the RSS budget is for 30)")
	flag.IntVar(&o.runs, "runs", 3, "runs of the binary; the RSS checked is the median")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Second, "how long to wait for all pods to be Running")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "how long to keep sampling memory after all pods are Running")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (binary, manifests, logs) and print its path")
	flag.StringVar(&o.binary, "binary", "", "use this standalone binary instead of building one")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	over, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(2)
	}
	if over {
		fmt.Fprintln(os.Stderr, "footprint: over budget (if the growth is intended, raise the number in "+o.budgets+" and say why in the commit)")
		os.Exit(1)
	}
}

// measurement is what one run measured.
type measurement struct {
	strippedBytes int64
	rss           rssRun // the median run
}

// rssRun is one run of the binary with the pods.
type rssRun struct {
	rssBytes  int64 // VmRSS at the end of the settle time
	hwmBytes  int64 // VmHWM (peak) at the end of the settle time
	toRunning time.Duration
}

// medianRun returns the run with the median VmHWM (the upper one of an even count).
func medianRun(runs []rssRun) rssRun {
	s := append([]rssRun(nil), runs...)
	sort.Slice(s, func(i, j int) bool { return s[i].hwmBytes < s[j].hwmBytes })
	return s[len(s)/2]
}

func run(ctx context.Context, o options, out io.Writer) (over bool, err error) {
	budgets, err := readBudgets(o.budgets)
	if err != nil {
		return false, err
	}
	for _, k := range []string{keyStripped, keyRSS, keyMinimal} {
		if _, ok := budgets[k]; !ok {
			return false, fmt.Errorf("%s: no %s", o.budgets, k)
		}
	}
	if o.pods <= 0 {
		return false, fmt.Errorf("-pods must be positive, got %d", o.pods)
	}
	if o.runs <= 0 {
		return false, fmt.Errorf("-runs must be positive, got %d", o.runs)
	}

	work, err := os.MkdirTemp("", "nodekit-footprint-")
	if err != nil {
		return false, err
	}
	if o.keep {
		fmt.Fprintln(out, "work directory:", work)
	} else {
		defer os.RemoveAll(work)
	}

	bin := o.binary
	if bin == "" {
		bin = filepath.Join(work, "standalone")
		if err := buildStripped(ctx, bin, "./examples/standalone"); err != nil {
			return false, err
		}
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return false, err
	}
	m := measurement{strippedBytes: fi.Size()}
	// The smallest agent a program can be (examples/minimal: the Builder
	// on the fake runtime, a manifest directory): what a part that is never
	// called must not add to.
	minimalBin := filepath.Join(work, "minimal")
	if err := buildStripped(ctx, minimalBin, "./examples/minimal"); err != nil {
		return false, err
	}
	mfi, err := os.Stat(minimalBin)
	if err != nil {
		return false, err
	}

	// Resident memory varies by a few percent from run to run (when the GC
	// runs, which pages of the binary the kernel maps around a fault): the
	// budget is checked against the median of o.runs runs.
	var runs []rssRun
	for i := range o.runs {
		r, err := measureRSS(ctx, o, bin, filepath.Join(work, fmt.Sprintf("run%d", i)))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "run %d: %d pods Running after %s; VmHWM %s, VmRSS %s after %s more\n",
			i+1, o.pods, r.toRunning.Round(time.Millisecond), mb(r.hwmBytes), mb(r.rssBytes), o.settle)
		runs = append(runs, r)
	}
	m.rss = medianRun(runs)

	rows := []row{
		{name: keyStripped, measured: m.strippedBytes, budget: budgets[keyStripped], target: budgets[targetPrefix+keyStripped]},
		{name: keyRSS, measured: m.rss.hwmBytes, budget: budgets[keyRSS], target: budgets[targetPrefix+keyRSS]},
		{name: keyMinimal, measured: mfi.Size(), budget: budgets[keyMinimal], target: budgets[targetPrefix+keyMinimal]},
	}
	fmt.Fprintf(out, "\nexamples/standalone: stripped binary; peak RSS (VmHWM, median of %d runs) with %d pods on the fake runtime; examples/minimal: stripped binary\n", len(runs), o.pods)
	over = printTable(out, rows)
	return over, nil
}

// buildStripped builds pkg as CI measures it: stripped, static (no libc
// mapped in, as an appliance ships it), paths trimmed.
func buildStripped(ctx context.Context, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (run from the repository root): %w", pkg, err)
	}
	return nil
}

// measureRSS runs the binary on the fake runtime with o.pods manifests, waits
// until they are all Running, samples its memory for o.settle, and stops it.
func measureRSS(ctx context.Context, o options, bin, work string) (rssRun, error) {
	var m rssRun
	err := measureInto(ctx, o, bin, work, &m)
	return m, err
}

func measureInto(ctx context.Context, o options, bin, work string, m *rssRun) error {
	manifests := filepath.Join(work, "manifests")
	if err := writeManifests(manifests, o.pods); err != nil {
		return err
	}
	statusFile := filepath.Join(work, "status.json")
	logPath := filepath.Join(work, "standalone.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	// --duration bounds the agent's life even if this program dies before its SIGTERM.
	life := o.timeout + o.settle + 30*time.Second
	cmd := exec.Command(bin,
		"--manifests", manifests,
		"--root", filepath.Join(work, "root"),
		"--status-file", statusFile,
		"--node-name", "footprint",
		"--duration", life.String())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(err error) error {
		return fmt.Errorf("%w\n--- standalone log (tail) ---\n%s", err, tail(logPath, 20))
	}

	proc := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	running, last := 0, ""
	for running < o.pods {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			stopped = true
			return fail(fmt.Errorf("standalone exited before all pods were Running: %v", err))
		case <-deadline.C:
			return fail(fmt.Errorf("after %s only %d of %d pods Running (last status: %s)", o.timeout, running, o.pods, last))
		case <-tick.C:
		}
		data, err := os.ReadFile(statusFile)
		if err != nil {
			continue // not written yet
		}
		running, last, err = countRunning(data)
		if err != nil {
			continue // written atomically, but be lenient
		}
	}
	m.toRunning = time.Since(start)

	settle := time.NewTimer(o.settle)
	defer settle.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			stopped = true
			return fail(fmt.Errorf("standalone exited during the settle time: %v", err))
		case <-settle.C:
			done = true
		case <-tick.C:
		}
		data, err := os.ReadFile(proc)
		if err != nil {
			return err
		}
		rss, hwm, err := parseProcStatus(data)
		if err != nil {
			return err
		}
		m.rssBytes = rss
		m.hwmBytes = max(m.hwmBytes, hwm)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			return fail(fmt.Errorf("standalone did not exit cleanly on SIGTERM: %v", err))
		}
	case <-time.After(15 * time.Second):
		return fail(errors.New("standalone did not exit within 15s of SIGTERM"))
	}
	return nil
}

// writeManifests writes n small host-network static pods into dir.
func writeManifests(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range n {
		name := fmt.Sprintf("footprint-%03d", i)
		pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    app: footprint
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/nodekit/busybox:1
    command: ["sleep", "3600"]
`, name)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(pod), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// podReport is the part of examples/standalone's status file read here.
type podReport struct {
	Name       string `json:"name"`
	Phase      string `json:"phase"`
	Containers []struct {
		State string `json:"state"`
	} `json:"containers"`
}

// countRunning counts the pods of a status file that are Running with every
// container running, and summarises the phases for error messages.
func countRunning(data []byte) (running int, summary string, err error) {
	var pods []podReport
	if err := json.Unmarshal(data, &pods); err != nil {
		return 0, "", err
	}
	phases := map[string]int{}
	for _, p := range pods {
		phases[p.Phase]++
		if p.Phase != "Running" || len(p.Containers) == 0 {
			continue
		}
		all := true
		for _, c := range p.Containers {
			all = all && c.State == "running"
		}
		if all {
			running++
		}
	}
	var parts []string
	for ph, n := range phases {
		parts = append(parts, fmt.Sprintf("%s=%d", ph, n))
	}
	if len(parts) == 0 {
		parts = append(parts, "no pods")
	}
	sort.Strings(parts)
	return running, strings.Join(parts, " "), nil
}

// parseProcStatus returns VmRSS and VmHWM of a /proc/<pid>/status, in bytes.
func parseProcStatus(data []byte) (rss, hwm int64, err error) {
	st, err := procmem.Parse(bytes.NewReader(data))
	if err != nil {
		return 0, 0, fmt.Errorf("/proc status: %w", err)
	}
	if st.HWM == 0 {
		return 0, 0, errors.New("/proc status: no VmHWM line")
	}
	return int64(st.RSS), int64(st.HWM), nil
}

// readBudgets reads "key value" lines; # starts a comment; values are
// non-negative integers (underscores allowed as digit separators).
func readBudgets(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseBudgets(path, string(data))
}

func parseBudgets(name, text string) (map[string]int64, error) {
	out := map[string]int64{}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"key value\", got %q", name, i+1, strings.TrimSpace(line))
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(f[1], "_", ""), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: %s: not a byte count: %q", name, i+1, f[0], f[1])
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s given twice", name, i+1, f[0])
		}
		out[f[0]] = v
	}
	return out, nil
}

type row struct {
	name                     string
	measured, budget, target int64 // target 0: none
}

// printTable prints the rows and reports whether any is over its budget.
func printTable(w io.Writer, rows []row) (over bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMEASURED\tBUDGET\tTARGET\tRESULT")
	for _, r := range rows {
		result := "ok"
		if r.measured > r.budget {
			result = fmt.Sprintf("OVER BUDGET by %s", mb(r.measured-r.budget))
			over = true
		}
		if r.target > 0 && r.measured > r.target {
			result += fmt.Sprintf(", over target by %s", mb(r.measured-r.target))
		}
		target := "-"
		if r.target > 0 {
			target = mb(r.target)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, mb(r.measured), mb(r.budget), target, result)
	}
	tw.Flush()
	return over
}

// mb formats bytes as decimal megabytes with the exact count.
func mb(b int64) string {
	return fmt.Sprintf("%.2f MB (%d)", float64(b)/1e6, b)
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
