package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/lifecycle"
)

type rotEnv struct {
	t    *testing.T
	clk  *clocktesting.FakeClock
	cri  *fake.Runtime
	m    *Manager
	id   string
	path string
	n    int // lines written
}

func newRotEnv(t *testing.T, cfg Config) *rotEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	cri, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sb, err := cri.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"},
		LogDirectory: dir,
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := cri.CreateContainer(t.Context(), sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		LogPath:  "app/0.log",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cri.StartContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	cfg.Runtime, cfg.Clock, cfg.Logger = cri, clk, zaptest.NewLogger(t)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rotEnv{t: t, clk: clk, cri: cri, m: m, id: id, path: filepath.Join(dir, "app", "0.log")}
}

// write appends about bytes bytes of numbered lines ("line <n>", padded).
func (e *rotEnv) write(bytes int) {
	e.t.Helper()
	var b strings.Builder
	for b.Len() < bytes {
		e.n++
		b.WriteString("line " + itoa(e.n) + " " + strings.Repeat("x", 40) + "\n")
	}
	if err := e.cri.AppendLog(e.id, runtimeapi.Stdout, b.String()); err != nil {
		e.t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// files lists the directory's file names, sorted.
func (e *rotEnv) files() []string {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Dir(e.path))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	sort.Strings(out)
	return out
}

func (e *rotEnv) rotate() error {
	e.t.Helper()
	return e.m.RotateOnce(e.t.Context())
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotateWhenTheSizeIsCrossed(t *testing.T) {
	e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 3})
	e.write(500)
	if err := e.rotate(); err != nil {
		t.Fatal(err)
	}
	if got := e.files(); len(got) != 1 || e.cri.CountCalls("ReopenContainerLog") != 0 {
		t.Fatalf("below MaxSize: %v, %d reopens", got, e.cri.CountCalls("ReopenContainerLog"))
	}
	e.write(600)
	before, _ := os.ReadFile(e.path)
	if err := e.rotate(); err != nil {
		t.Fatal(err)
	}
	rotated := "0.log." + t0.Format("20060102-150405")
	if got := e.files(); strings.Join(got, ",") != "0.log,"+rotated || e.cri.CountCalls("ReopenContainerLog") != 1 {
		t.Fatalf("after crossing MaxSize: %v, %d reopens", got, e.cri.CountCalls("ReopenContainerLog"))
	}
	if b, _ := os.ReadFile(filepath.Join(filepath.Dir(e.path), rotated)); string(b) != string(before) {
		t.Fatal("the rotated file is not the old live log")
	}
	// The runtime writes to the new file.
	e.write(100)
	if fi, err := os.Stat(e.path); err != nil || fi.Size() == 0 {
		t.Fatalf("new live log: %v %v", fi, err)
	}
	// The next pass compresses the rotated file (not before: the runtime
	// might still be writing to it).
	e.clk.Step(10 * time.Second)
	if err := e.rotate(); err != nil {
		t.Fatal(err)
	}
	if got := e.files(); strings.Join(got, ",") != "0.log,"+rotated+".gz" {
		t.Fatalf("after the next pass: %v", got)
	}
	if s := gunzip(t, filepath.Join(filepath.Dir(e.path), rotated+".gz")); s != string(before) {
		t.Fatal("compressed content differs")
	}
	// And the reader sees every line, in order.
	r := newTestReader(t)
	out, _ := read(t, r, e.path, all())
	if !strings.HasPrefix(out, "line 1 ") || strings.Count(out, "\n") != e.n {
		t.Fatalf("read back %d lines, wrote %d", strings.Count(out, "\n"), e.n)
	}
}

func TestRotateKeepsMaxFiles(t *testing.T) {
	const maxSize, maxFiles = 2000, 4
	e := newRotEnv(t, Config{MaxSize: maxSize, MaxFiles: maxFiles})
	for range 12 {
		e.write(maxSize + 100)
		if err := e.rotate(); err != nil {
			t.Fatal(err)
		}
		e.clk.Step(10 * time.Second)
		if got := e.files(); len(got) > maxFiles {
			t.Fatalf("%d files: %v", len(got), got)
		}
	}
	got := e.files()
	if len(got) != maxFiles {
		t.Fatalf("files %v", got)
	}
	gz := 0
	for _, f := range got {
		if strings.HasSuffix(f, ".gz") {
			gz++
		}
	}
	if gz != maxFiles-2 { // the newest rotated file waits for the next pass
		t.Fatalf("%d compressed of %v", gz, got)
	}
	// The newest lines are readable through the rotated files.
	out, _ := read(t, newTestReader(t), e.path, Options{TailLines: 100})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 100 || !strings.HasPrefix(lines[99], "line "+itoa(e.n)+" ") || !strings.HasPrefix(lines[0], "line "+itoa(e.n-99)+" ") {
		t.Fatalf("tail 100: first %q last %q (%d lines)", lines[0], lines[len(lines)-1], len(lines))
	}
}

func TestRotateCleansCrashLeftovers(t *testing.T) {
	e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 5})
	e.write(100)
	dir := filepath.Dir(e.path)
	// A compression cut short, one that renamed but did not remove, and a
	// rotation that renamed the live log but never reopened it.
	writeFile(t, filepath.Join(dir, "0.log.20261126-100000.tmp"), []byte("half"))
	writeFile(t, filepath.Join(dir, "0.log.20261126-100000"), encode(lines(1, 2)))
	writeGz(t, filepath.Join(dir, "0.log.20261126-103000.gz"), encode(lines(3, 4)))
	writeFile(t, filepath.Join(dir, "0.log.20261126-103000"), encode(lines(3, 4)))
	if err := os.Rename(e.path, filepath.Join(dir, "0.log.20261126-110000")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "unrelated.txt"), []byte("kept"))
	if err := e.rotate(); err != nil {
		t.Fatal(err)
	}
	want := "0.log,0.log.20261126-100000.gz,0.log.20261126-103000.gz,0.log.20261126-110000.gz,unrelated.txt"
	if got := strings.Join(e.files(), ","); got != want || e.cri.CountCalls("ReopenContainerLog") != 1 {
		t.Fatalf("after the pass: %s (%d reopens), want %s", got, e.cri.CountCalls("ReopenContainerLog"), want)
	}
	if s := gunzip(t, filepath.Join(dir, "0.log.20261126-100000.gz")); s != string(encode(lines(1, 2))) {
		t.Fatalf("recompressed: %q", s)
	}
}

func TestRotateReopenFailureRenamesBack(t *testing.T) {
	e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 3})
	e.write(1200)
	before, _ := os.ReadFile(e.path)
	e.cri.InjectError("ReopenContainerLog", status.Error(codes.Internal, "boom"), 1)
	if err := e.rotate(); err == nil || errors.Is(err, ErrReopenUnimplemented) {
		t.Fatalf("pass with a failing reopen: %v", err)
	}
	if got := e.files(); len(got) != 1 {
		t.Fatalf("files %v", got)
	}
	if b, _ := os.ReadFile(e.path); string(b) != string(before) {
		t.Fatal("live log not renamed back")
	}
	e.write(10) // still the same file
	if e.m.Disabled() {
		t.Fatal("a failed reopen turned rotation off")
	}
	e.clk.Step(10 * time.Second)
	if err := e.rotate(); err != nil {
		t.Fatalf("next pass: %v", err)
	}
	if got := e.files(); len(got) != 2 {
		t.Fatalf("next pass did not rotate: %v", got)
	}
}

func TestRotateUnimplementedTurnsRotationOff(t *testing.T) {
	e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 3})
	e.write(1200)
	e.cri.InjectError("ReopenContainerLog", status.Error(codes.Unimplemented, "no"), -1)
	if err := e.rotate(); !errors.Is(err, ErrReopenUnimplemented) {
		t.Fatalf("pass: %v", err)
	}
	if got := e.files(); len(got) != 1 || !e.m.Disabled() {
		t.Fatalf("files %v, disabled %v", got, e.m.Disabled())
	}
	e.cri.ResetCalls()
	for range 3 {
		e.clk.Step(10 * time.Second)
		if err := e.rotate(); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.cri.CallsReceived(); n != 0 {
		t.Fatalf("%d CRI calls after Unimplemented, want none", n)
	}
}

func TestRotateRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRotEnv(t, Config{MaxSize: 1000, MaxFiles: 3, MonitorInterval: 10 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.m.Run(ctx) }()
		synctest.Wait()
		e.write(1200)
		e.clk.Step(10 * time.Second)
		synctest.Wait()
		if got := e.files(); len(got) != 2 {
			t.Fatalf("after one interval: %v", got)
		}
		// The next pass hands the rotated file to Run's compressor.
		e.clk.Step(10 * time.Second)
		synctest.Wait()
		if got := e.files(); len(got) != 2 || !strings.HasSuffix(got[1], ".gz") {
			t.Fatalf("after two intervals: %v", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := e.m.Run(t.Context()); !errors.Is(err, lifecycle.ErrAlreadyRan) {
			t.Fatalf("second Run: %v", err)
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	cri, _ := fake.New(fake.Config{})
	for _, cfg := range []Config{
		{},
		{Runtime: cri, MaxFiles: 1},
		{Runtime: cri, MonitorInterval: -time.Second},
		{Runtime: cri, Workers: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	m, err := New(Config{Runtime: cri, MaxSize: -1})
	if err != nil || !m.Disabled() {
		t.Fatalf("negative MaxSize: %v", err)
	}
}
