package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 35 0 0 20 0 12 0 100 1000000 2000 18446744073709551615\n"
	got, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1850 * time.Millisecond; got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"4242 no paren S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 3 0 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseHWM(t *testing.T) {
	got, err := parseHWM("Name:\tstandalone\nVmPeak:\t 1300000 kB\nVmHWM:\t   28744 kB\nVmRSS:\t 1 kB\n")
	if err != nil || got != 28744*1024 {
		t.Fatalf("got %d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t1 MB\n", "VmHWM:\tx kB\n"} {
		if _, err := parseHWM(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPercentileMedian(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("p%v: got %v, want %v", c.p, got, c.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input in place")
	}
	if percentile(nil, 0.5) != 0 || median(nil) != 0 || medianInt(nil) != 0 {
		t.Error("empty input")
	}
	if got := median([]time.Duration{3, 1, 2, 4}); got != 3 {
		t.Errorf("median: %v", got)
	}
	if got := medianInt([]int64{5, 1, 9}); got != 5 {
		t.Errorf("medianInt: %v", got)
	}
}

func TestParseLists(t *testing.T) {
	ns, err := parseCounts("30, 100,")
	if err != nil || len(ns) != 2 || ns[0] != 30 || ns[1] != 100 {
		t.Fatalf("%v %v", ns, err)
	}
	for _, bad := range []string{"0", "x", "-3", "1001"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("counts %q: no error", bad)
		}
	}
	ds, err := parseDurations("1s,50ms")
	if err != nil || len(ds) != 2 || ds[1] != 50*time.Millisecond {
		t.Fatalf("%v %v", ds, err)
	}
	if ds, err := parseDurations("evented,1s"); err != nil || len(ds) != 2 || ds[0] != 0 || ds[1] != time.Second {
		t.Fatalf("evented,1s: %v %v", ds, err)
	}
	for _, bad := range []string{"0s", "fast", "-1s"} {
		if _, err := parseDurations(bad); err == nil {
			t.Errorf("durations %q: no error", bad)
		}
	}
}

// The manifests are valid static pods: host network, the namespace the
// runtime's containers are counted by, the restart policy asked for.
func TestManifestsDecode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	publish, names, err := stageManifests(dir, "nk", "localhost/nodekit/busybox:1", "Never", 3)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("manifests visible before publish: %d", len(ents))
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 || names[2] != "nk-002" {
		t.Fatalf("names %v", names)
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		pods, err := podconfig.DecodeStaticPods(data, podconfig.StaticPodOptions{NodeName: "e2ebench", Source: kubetypes.SourceFile, Origin: n})
		if err != nil || len(pods) != 1 {
			t.Fatalf("%s: %v", n, err)
		}
		p := pods[0]
		c := p.Spec.Containers[0]
		if !p.Spec.HostNetwork || p.Namespace != namespace || p.Spec.RestartPolicy != v1.RestartPolicyNever ||
			p.Name != n+"-e2ebench" || len(c.Command) != 3 || c.Command[2] != containerScript ||
			c.Resources.Requests.Cpu().MilliValue() != 5 {
			t.Errorf("%s: %+v", n, p.Spec)
		}
	}
}

func TestFirstExitSeen(t *testing.T) {
	log := strings.Join([]string{
		`{"time":"2026-01-01T00:00:01Z","name":"a","containers":[{"containerID":"containerd://A","state":"running"}]}`,
		`{"time":"2026-01-01T00:00:03Z","name":"a","containers":[{"containerID":"containerd://A","state":"terminated"}]}`,
		`{"time":"2026-01-01T00:00:02Z","name":"a","containers":[{"containerID":"containerd://A","state":"terminated"}]}`,
		`{"time":"2026-01-01T00:00:04Z","name":"b","containers":[{"containerID":"containerd://B2","state":"running","lastTerminatedID":"containerd://B"}]}`,
		`{"time":"2026-01-01T00:00:05Z","name":"c","containers":[{"containerID":"containerd://C","state":"terminated"}]}`,
		`{"time":"2026-01-01T00:00:06Z","name":"d","deleted":true}`,
	}, "\n")
	got, err := firstExitSeen([]byte(log), map[string]bool{"A": true, "B": true, "X": true})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	if len(got) != 2 || !got["A"].Equal(at(2)) || !got["B"].Equal(at(4)) {
		t.Fatalf("got %v", got)
	}
	if _, err := firstExitSeen([]byte("not json\n"), nil); err == nil {
		t.Error("a bad line was accepted")
	}
}

func TestRowsAndReport(t *testing.T) {
	o := options{runs: 1, poll: 10 * time.Millisecond}
	res := &Result{
		StrippedBytes: 23e6,
		Running: []runningCase{{Pods: 30,
			Nodekit: []time.Duration{2100 * time.Millisecond}, Floor: []time.Duration{2000 * time.Millisecond},
			NodekitCPU: []time.Duration{300 * time.Millisecond}, FloorCPU: []time.Duration{100 * time.Millisecond},
			NodekitHWM: []int64{28e6}, FloorHWM: []int64{14e6}}},
		Exits: []exitRun{
			{Period: time.Second, Pods: 110, IdleCPU: 600 * time.Millisecond, IdleWall: time.Minute,
				Latencies: []time.Duration{500 * time.Millisecond, 900 * time.Millisecond}},
			{Period: 50 * time.Millisecond, Pods: 110, IdleCPU: 3 * time.Second, IdleWall: time.Minute,
				Latencies: []time.Duration{40 * time.Millisecond, 80 * time.Millisecond}},
		},
		Reference:  kubeletReference,
		LoadBefore: "250.5 1 1",
	}
	res.Rows, res.Notes = rows(o, res)
	if !strings.Contains(strings.Join(res.Notes, "\n"), "load average up to 250.5") {
		t.Errorf("no load warning: %v", res.Notes)
	}
	byCase := map[string]Row{}
	for _, r := range res.Rows {
		byCase[r.Case] = r
	}
	if r := byCase["manifests to running, 30 pods"]; r.Ratio != "1.05x" || r.Result != "met" {
		t.Errorf("running: %+v", r)
	}
	if r := byCase["standalone stripped binary"]; r.Result != "met" {
		t.Errorf("binary: %+v", r)
	}
	if r := byCase["exit to pod status, 110 pods, relist 1s"]; r.Result != "MISSED" {
		t.Errorf("exit 1s: %+v", r)
	}
	if r := byCase["idle CPU, 110 pods, relist 1s"]; r.Result != "met" || r.Nodekit != "1.00% of a core" {
		t.Errorf("idle 1s: %+v", r)
	}
	if r := byCase["exit to pod status, 110 pods, relist 50ms"]; r.Result != "met" {
		t.Errorf("exit 50ms: %+v", r)
	}
	if r := byCase["idle CPU, 110 pods, relist 50ms"]; r.Result != "MISSED" {
		t.Errorf("idle 50ms: %+v", r)
	}
	if !strings.Contains(res.Notes[0], "no relist period") {
		t.Errorf("notes: %v", res.Notes)
	}
	var buf bytes.Buffer
	printReport(&buf, res)
	for _, want := range []string{"CASE", "manifests to running, 30 pods", "2100.0ms", "reference: kubelet"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestValidate(t *testing.T) {
	good := options{endpoint: "unix:///x", image: "i", pauseImage: "p", runs: 1, exitPods: 1, poll: 1, timeout: 1, idleWindow: 1, exitGap: 1, cases: "running,exit"}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	kl := good
	kl.kubelet, kl.cases = "/k", "exit"
	if err := kl.validate(); err == nil || !strings.Contains(err.Error(), "-kubelet") {
		t.Errorf("kubelet without the running case: %v", err)
	}
	bad := good
	bad.endpoint, bad.cases = "", "running,nope"
	err := bad.validate()
	if err == nil || !strings.Contains(err.Error(), "-endpoint") || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("got %v", err)
	}
}

// The tail reads only complete lines and picks up where it stopped.
func TestStatusTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.log")
	l1 := `{"time":"2026-01-01T00:00:01Z","name":"a","containers":[{"containerID":"containerd://A","state":"terminated"}]}` + "\n"
	l2 := `{"time":"2026-01-01T00:00:02Z","name":"b","containers":[{"containerID":"containerd://B","state":"terminated"}]}` + "\n"
	if err := os.WriteFile(path, []byte(l1+l2[:20]), 0o644); err != nil {
		t.Fatal(err)
	}
	tl := &statusTail{path: path, seen: map[string]time.Time{}}
	ids := map[string]bool{"A": true, "B": true}
	if err := tl.poll(ids); err != nil {
		t.Fatal(err)
	}
	if len(tl.seen) != 1 || tl.off != int64(len(l1)) {
		t.Fatalf("seen %v off %d", tl.seen, tl.off)
	}
	if err := os.WriteFile(path, []byte(l1+l2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tl.poll(ids); err != nil {
		t.Fatal(err)
	}
	if len(tl.seen) != 2 || !tl.seen["B"].Equal(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC)) {
		t.Fatalf("seen %v", tl.seen)
	}
}
