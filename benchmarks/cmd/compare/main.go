// Command compare runs the side-by-side benchmarks of this module (nodekit
// against the kubelet v1.36.3 packages, on the same input in the same run)
// and prints one table row per case: both sides' ns/op, B/op and
// allocs/op (medians over -count runs), the speed-up (kubelet ns/op over
// nodekit ns/op), and the target of nodekit issue #10 with met/missed.
//
// From the repository root:
//
//	cd benchmarks && go run ./cmd/compare
//
// Flags: -count (runs per benchmark, default 5), -benchtime (default
// 1s), -bench (regexp, default "."), -in FILE (parse saved `go test
// -bench` output instead of running it; "-" reads stdin).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is a goal of issue #10 for one case.
type target struct {
	speedup     float64 // kubelet ns/op / nodekit ns/op at least this
	allocsFrac  float64 // nodekit allocs <= kubelet allocs * allocsFrac (0: not checked)
	zeroAllocs  bool    // nodekit allocs/op must be 0
	description string
}

var targets = map[string]target{
	"PodConfigResyncOneStatus/pods=10000": {speedup: 20, allocsFrac: 1.0 / 20, description: ">=20x, <=1/20 allocs"},
	"PodConfigInitialLoad/pods=10000":     {speedup: 5, allocsFrac: 1.0 / 5, description: ">=5x, <=1/5 allocs"},
	"PLEGRelistUnchanged/pods=110":        {speedup: 3, zeroAllocs: true, description: ">=3x, 0 allocs"},
	"PLEGRelistUnchanged/pods=1000":       {speedup: 3, zeroAllocs: true, description: ">=3x, 0 allocs"},
	"CPUManagerStatic/cpus=64":            {speedup: 10, description: ">=10x"},
	"NodeStatusHeartbeatPatch":            {speedup: 10, description: ">=10x"},
}

type sample struct{ ns, cpu, bytes, allocs []float64 }

type result struct {
	name  string
	impls map[string]*sample
}

var (
	lineRE   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	metricRE = regexp.MustCompile(`([0-9.e+-]+) (\S+)`)
)

// parse reads `go test -bench` output. A benchmark named
// Benchmark<Case>/<sub>/<impl> is case <Case>/<sub>, implementation
// <impl> (nodekit or kubelet). Order of first appearance is kept.
func parse(r io.Reader, echo io.Writer) ([]*result, error) {
	var order []*result
	byName := map[string]*result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if echo != nil {
			fmt.Fprintln(echo, line)
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		i := strings.LastIndex(m[1], "/")
		if i < 0 {
			continue
		}
		name, impl := m[1][:i], m[1][i+1:]
		res := byName[name]
		if res == nil {
			res = &result{name: name, impls: map[string]*sample{}}
			byName[name] = res
			order = append(order, res)
		}
		s := res.impls[impl]
		if s == nil {
			s = &sample{}
			res.impls[impl] = s
		}
		for _, mm := range metricRE.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.ParseFloat(mm[1], 64)
			if err != nil {
				continue
			}
			switch mm[2] {
			case "ns/op":
				s.ns = append(s.ns, v)
			case "cpu-ns/op":
				s.cpu = append(s.cpu, v)
			case "B/op":
				s.bytes = append(s.bytes, v)
			case "allocs/op":
				s.allocs = append(s.allocs, v)
			}
		}
	}
	return order, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func human(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "-"
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func count(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// table prints one row per case. Times are "wall / cpu": the wall time
// per op and the process CPU time per op (cpu-ns/op, reported by the
// benchmarks). The speed-up and the targets use the CPU time when both
// sides report it: on a shared machine the wall time also counts the
// time spent waiting for a CPU, which differs between the two sides'
// runs.
func table(w io.Writer, results []*result) (missed int) {
	fmt.Fprintln(w, "| case | nodekit wall / cpu per op | nodekit B/op | nodekit allocs/op | kubelet wall / cpu per op | kubelet B/op | kubelet allocs/op | speed-up cpu (wall) | allocs kubelet/nodekit | target (#10) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range results {
		nk, ku := r.impls["nodekit"], r.impls["kubelet"]
		if nk == nil || ku == nil {
			continue
		}
		nns, kns := median(nk.ns), median(ku.ns)
		ncpu, kcpu := median(nk.cpu), median(ku.cpu)
		nal, kal := median(nk.allocs), median(ku.allocs)
		wall := kns / nns
		speed := wall
		speedCell := fmt.Sprintf("%.1fx (wall)", wall)
		if !math.IsNaN(ncpu) && !math.IsNaN(kcpu) && ncpu > 0 {
			speed = kcpu / ncpu
			speedCell = fmt.Sprintf("%.1fx (%.1fx)", speed, wall)
		}
		allocRatio := "-"
		switch {
		case nal == 0 && kal > 0:
			allocRatio = "∞ (0 allocs)"
		case nal > 0:
			allocRatio = fmt.Sprintf("%.1fx", kal/nal)
		}
		goal := "-"
		if t, ok := targets[r.name]; ok {
			var why []string
			if speed < t.speedup {
				why = append(why, fmt.Sprintf("speed %.1fx < %.0fx", speed, t.speedup))
			}
			if t.allocsFrac > 0 && nal > kal*t.allocsFrac {
				why = append(why, fmt.Sprintf("allocs %.0f > %.0f", nal, kal*t.allocsFrac))
			}
			if t.zeroAllocs && nal != 0 {
				why = append(why, fmt.Sprintf("allocs %.0f != 0", nal))
			}
			if len(why) == 0 {
				goal = t.description + ": **met**"
			} else {
				missed++
				goal = t.description + ": **missed** (" + strings.Join(why, ", ") + ")"
			}
		}
		fmt.Fprintf(w, "| %s | %s / %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |\n", r.name,
			human(nns), human(ncpu), count(median(nk.bytes)), count(nal),
			human(kns), human(kcpu), count(median(ku.bytes)), count(kal), speedCell, allocRatio, goal)
	}
	return missed
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return goruntime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return goruntime.GOARCH
}

// moduleDir finds the benchmarks module: the current directory or
// ./benchmarks below it.
func moduleDir() (string, error) {
	for _, d := range []string{".", "benchmarks"} {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/nodekit/nodekit/benchmarks")) {
			return d, nil
		}
	}
	return "", errors.New("run from the repository root or its benchmarks directory")
}

func main() {
	countFlag := flag.Int("count", 5, "runs of each benchmark (medians are shown)")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	bench := flag.String("bench", ".", "go test -bench regexp")
	in := flag.String("in", "", "parse this saved go test -bench output instead of running (- for stdin)")
	verbose := flag.Bool("v", false, "echo the go test output to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var (
		results []*result
		err     error
		echo    io.Writer
	)
	if *verbose {
		echo = os.Stderr
	}
	started := time.Now().UTC()
	switch *in {
	case "":
		dir, derr := moduleDir()
		if derr != nil {
			fmt.Fprintln(os.Stderr, "compare:", derr)
			os.Exit(2)
		}
		args := []string{"test", "-run", "^$", "-bench", *bench, "-benchmem", "-count", strconv.Itoa(*countFlag), "-benchtime", *benchtime, "."}
		fmt.Fprintf(os.Stderr, "compare: go %s (in %s)\n", strings.Join(args, " "), dir)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		out, perr := cmd.StdoutPipe()
		if perr != nil {
			fmt.Fprintln(os.Stderr, "compare:", perr)
			os.Exit(1)
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		var buf bytes.Buffer
		results, err = parse(io.TeeReader(out, &buf), echo)
		if werr := cmd.Wait(); werr != nil {
			os.Stderr.Write(buf.Bytes())
			fmt.Fprintln(os.Stderr, "compare: go test:", werr)
			os.Exit(1)
		}
	case "-":
		results, err = parse(os.Stdin, echo)
	default:
		f, ferr := os.Open(*in)
		if ferr != nil {
			fmt.Fprintln(os.Stderr, "compare:", ferr)
			os.Exit(1)
		}
		results, err = parse(f, echo)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "compare: no benchmark results")
		os.Exit(1)
	}
	how := fmt.Sprintf("medians of -count %d -benchtime %s", *countFlag, *benchtime)
	if *in != "" {
		how = "parsed from " + *in
	}
	fmt.Printf("nodekit vs kubelet v1.36.3 — %s, %s, %d CPUs, %s/%s, %s; %s\n\n",
		started.Format("2006-01-02"), cpuModel(), goruntime.NumCPU(), goruntime.GOOS, goruntime.GOARCH, goruntime.Version(), how)
	missed := table(os.Stdout, results)
	fmt.Printf("\n%d target(s) missed.\n", missed)
}
