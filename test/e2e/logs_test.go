//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kuberuntime/logs"
)

// The chatty container writes chunks x linesPerChunk numbered lines of
// about 110 bytes (50 MB), a chunk at a time with short pauses (about 2
// MB/s), then "done", then sleeps.
const (
	chunks        = 50
	linesPerChunk = 9000
	logMaxSize    = 2 << 20
	logMaxFiles   = 8 // lets a follower on a loaded machine lag a few rotations
)

const chattyManifest = `apiVersion: v1
kind: Pod
metadata:
  name: chatty
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: IMAGE
    command: ["sh", "-c"]
    args:
    - |
      trap 'exit 0' TERM
      i=0
      while [ $i -lt CHUNKS ]; do
        awk -v c=$i 'BEGIN { p = sprintf("%0100d", 0); for (j = 0; j < LINES; j++) printf "line %07d %s\n", c*LINES+j, p }'
        i=$((i+1))
        sleep 0.3
      done
      echo done
      sleep 3600 & wait
`

// logDirState is what a container's log directory holds.
type logDirState struct {
	files      []string
	total      int64
	compressed int
	live       int64
}

func readLogDir(t *testing.T, dir string) logDirState {
	t.Helper()
	var s logDirState
	ents, err := os.ReadDir(dir)
	if err != nil {
		return s
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		s.files = append(s.files, fmt.Sprintf("%s(%d)", e.Name(), fi.Size()))
		s.total += fi.Size()
		switch {
		case strings.HasSuffix(e.Name(), ".gz"):
			s.compressed++
		case e.Name() == "0.log":
			s.live = fi.Size()
		}
	}
	return s
}

// lineChecker is written the followed output and checks that the numbered
// lines come in order.
type lineChecker struct {
	mu                sync.Mutex
	buf               []byte
	last, gaps, lines int
	disorder          []string
	gapAt             []string
	done              bool
}

func (c *lineChecker) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		c.lineLocked(string(c.buf[:i]))
		c.buf = c.buf[i+1:]
	}
	return len(p), nil
}

func (c *lineChecker) line(l string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lineLocked(l)
}

func (c *lineChecker) lineLocked(l string) {
	if l == "done" {
		c.done = true
		return
	}
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "line" {
		c.disorder = append(c.disorder, "bad line "+l[:min(len(l), 40)])
		return
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		c.disorder = append(c.disorder, "bad number "+f[1])
		return
	}
	c.lines++
	switch {
	case n <= c.last && c.lines > 1:
		c.disorder = append(c.disorder, fmt.Sprintf("%d after %d", n, c.last))
	case n != c.last+1 && c.lines > 1:
		c.gaps += n - c.last - 1
		c.gapAt = append(c.gapAt, fmt.Sprintf("%d-%d", c.last+1, n-1))
	}
	c.last = n
}

// TestContainerLogRotation runs the agent in-process against containerd
// with a small rotation size: a container writing 50 MB of logs leaves at
// most MaxFiles files of at most MaxSize (+ one) on disk, the rotated ones
// compressed; the latest lines are readable through GetContainerLogs,
// tails reach into the compressed files, and a follower started before
// the writing sees every line once, in order, across the rotations.
func TestContainerLogRotation(t *testing.T) {
	e := volumeEnv(t)
	t.Cleanup(func() { e.cleanup(t) })
	dir, manifests := agentDirs(t)
	m := strings.NewReplacer("IMAGE", e.busybox, "CHUNKS", strconv.Itoa(chunks), "LINES", strconv.Itoa(linesPerChunk)).Replace(chattyManifest)
	writeManifest(t, manifests, "chatty", m)
	sink := newStatusSink()
	agent, err := e.builder(dir, manifests).
		WithStatusSink(sink).
		WithContainerLogRotation(logs.Config{MaxSize: logMaxSize, MaxFiles: logMaxFiles, MonitorInterval: time.Second}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, agent, 30*time.Second)
	ctx := t.Context()
	name := "chatty-" + nodeName

	var pod *v1.Pod
	waitFor(t, 90*time.Second, "the chatty container runs", func() (bool, string) {
		for _, p := range agent.Pods() {
			if p.Name == name {
				pod = p
			}
		}
		c, st := sink.container(name, "main")
		return pod != nil && c.State.Running != nil, fmt.Sprintf("phase %s, %+v", st.Phase, c.State)
	})
	logDir := filepath.Join(dir, "pod-logs", fmt.Sprintf("default_%s_%s", name, pod.UID), "main")

	// A follower from the first line.
	checker := &lineChecker{last: -1}
	followCtx, stopFollow := context.WithCancel(ctx)
	followDone := make(chan error, 1)
	go func() {
		followDone <- agent.Runtime().GetContainerLogs(followCtx, pod, "main", &v1.PodLogOptions{Follow: true}, checker, checker)
	}()

	var peak logDirState
	start := time.Now()
	waitFor(t, 5*time.Minute, "the container wrote everything", func() (bool, string) {
		if s := readLogDir(t, logDir); s.total > peak.total {
			peak = s
		}
		var out bytes.Buffer
		err := agent.Runtime().GetContainerLogs(ctx, pod, "main", &v1.PodLogOptions{TailLines: ptr.To[int64](1)}, &out, &out)
		return err == nil && out.String() == "done\n", fmt.Sprintf("last line %.40q, %v", out.String(), err)
	})
	t.Logf("50 MB written in %v; peak on disk %d bytes: %v", time.Since(start).Round(time.Millisecond), peak.total, peak.files)

	// Within a few passes: every rotated file compressed, the bound held.
	var s logDirState
	waitFor(t, 60*time.Second, "rotated files compressed", func() (bool, string) {
		s = readLogDir(t, logDir)
		return len(s.files) > 1 && s.compressed == len(s.files)-1, fmt.Sprint(s.files)
	})
	t.Logf("on disk after the writing: %d bytes in %v", s.total, s.files)
	if len(s.files) > logMaxFiles || s.total > (logMaxFiles+1)*logMaxSize {
		t.Errorf("log directory holds %d files, %d bytes: want at most %d files and %d bytes", len(s.files), s.total, logMaxFiles, (logMaxFiles+1)*logMaxSize)
	}
	if len(s.files) < 3 {
		t.Errorf("only %v: the log was not rotated", s.files)
	}

	// The latest lines, exactly.
	last := chunks*linesPerChunk - 1
	var out bytes.Buffer
	if err := agent.Runtime().GetContainerLogs(ctx, pod, "main", &v1.PodLogOptions{TailLines: ptr.To[int64](3)}, &out, &out); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("0", 100)
	want := fmt.Sprintf("line %07d %s\nline %07d %s\ndone\n", last-1, pad, last, pad)
	if out.String() != want {
		t.Errorf("tail 3: %q", out.String())
	}
	// A tail longer than the live file reaches into the compressed ones.
	out.Reset()
	const long = 30000
	if err := agent.Runtime().GetContainerLogs(ctx, pod, "main", &v1.PodLogOptions{TailLines: ptr.To[int64](long)}, &out, &out); err != nil {
		t.Fatal(err)
	}
	tc := &lineChecker{last: -1}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		tc.line(l)
	}
	if tc.lines != long-1 || tc.gaps != 0 || len(tc.disorder) != 0 || tc.last != last || !tc.done {
		t.Errorf("tail %d: %d numbered lines ending at %d, %d missing, disorder %v, done %v", long, tc.lines, tc.last, tc.gaps, tc.disorder, tc.done)
	}

	// The follower saw every line in order across the rotations.
	waitFor(t, 30*time.Second, "the follower reached the end", func() (bool, string) {
		checker.mu.Lock()
		defer checker.mu.Unlock()
		return checker.done, fmt.Sprintf("at line %d", checker.last)
	})
	stopFollow()
	<-followDone
	t.Logf("follower: %d lines, %d missing at rotations", checker.lines, checker.gaps)
	if len(checker.disorder) != 0 || checker.last != last || checker.lines+checker.gaps != chunks*linesPerChunk {
		t.Errorf("follower: %d lines up to %d, %d missing, disorder %v", checker.lines, checker.last, checker.gaps, checker.disorder[:min(len(checker.disorder), 5)])
	}
	if checker.gaps > 0 {
		t.Errorf("follower missed %d lines across rotations: %v", checker.gaps, checker.gapAt)
	}

	stop()
}
