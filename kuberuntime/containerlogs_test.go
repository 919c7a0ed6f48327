package kuberuntime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

type logsEnv struct {
	t    *testing.T
	clk  *clocktesting.FakeClock
	cri  *fake.Runtime
	m    *kuberuntime.Manager
	pod  *v1.Pod
	root string // PodLogsRoot
}

func newLogsEnv(t *testing.T, policy v1.RestartPolicy) *logsEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	cri, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri, Clock: clk, PodLogsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-logs", Name: "logs", Namespace: "default"},
		Spec:       v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	return &logsEnv{t: t, clk: clk, cri: cri, m: m, pod: pod, root: root}
}

// sync runs one SyncPod and returns the id of the newest app instance.
func (e *logsEnv) sync() string {
	e.t.Helper()
	st, err := e.m.GetPodStatus(e.t.Context(), e.pod.UID, e.pod.Name, e.pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.m.SyncPod(e.t.Context(), e.pod, st, nil).Err(); err != nil {
		e.t.Fatal(err)
	}
	st, err = e.m.GetPodStatus(e.t.Context(), e.pod.UID, e.pod.Name, e.pod.Namespace)
	if err != nil || len(st.ContainerStatuses) == 0 {
		e.t.Fatalf("status: %v", err)
	}
	return st.ContainerStatuses[0].ID
}

func (e *logsEnv) write(id string, stream runtimeapi.LogStreamType, text string) {
	e.t.Helper()
	if err := e.cri.AppendLog(id, stream, text); err != nil {
		e.t.Fatal(err)
	}
}

func (e *logsEnv) logs(opts *v1.PodLogOptions) (string, string, error) {
	var out, errb bytes.Buffer
	err := e.m.GetContainerLogs(e.t.Context(), e.pod, "app", opts, &out, &errb)
	return out.String(), errb.String(), err
}

func TestGetContainerLogsCurrentAndPrevious(t *testing.T) {
	e := newLogsEnv(t, v1.RestartPolicyAlways)
	first := e.sync()
	e.write(first, runtimeapi.Stdout, "first 1\nfirst 2\n")
	e.write(first, runtimeapi.Stderr, "first err\n")

	out, errs, err := e.logs(&v1.PodLogOptions{})
	if err != nil || out != "first 1\nfirst 2\n" || errs != "first err\n" {
		t.Fatalf("current: %q %q %v", out, errs, err)
	}
	if _, _, err := e.logs(&v1.PodLogOptions{Previous: true}); !errors.Is(err, kuberuntime.ErrNoPreviousInstance) {
		t.Fatalf("previous of a first instance: %v", err)
	}
	// The last line of both streams is stderr's.
	out, errs, err = e.logs(&v1.PodLogOptions{TailLines: ptr.To[int64](1), Timestamps: true})
	if err != nil || out != "" || errs != "2026-11-26T12:00:00.000000000Z first err\n" {
		t.Fatalf("tail 1 with timestamps: %q %q %v", out, errs, err)
	}
	out, errs, err = e.logs(&v1.PodLogOptions{Stream: ptr.To(v1.LogStreamStderr)})
	if err != nil || out != "" || errs != "first err\n" {
		t.Fatalf("stderr stream: %q %q %v", out, errs, err)
	}

	// It crashes: waiting to restart, both current and previous are it.
	if err := e.cri.ExitContainer(first, 1, ""); err != nil {
		t.Fatal(err)
	}
	for _, prev := range []bool{false, true} {
		out, _, err := e.logs(&v1.PodLogOptions{Previous: prev})
		if err != nil || out != "first 1\nfirst 2\n" {
			t.Fatalf("crashed, previous=%v: %q %v", prev, out, err)
		}
	}

	// Restarted: current is the new instance, previous the crashed one.
	second := e.sync()
	if second == first {
		t.Fatal("no new instance")
	}
	e.write(second, runtimeapi.Stdout, "second\n")
	out, _, err = e.logs(nil)
	if err != nil || out != "second\n" {
		t.Fatalf("after restart: %q %v", out, err)
	}
	out, _, err = e.logs(&v1.PodLogOptions{Previous: true})
	if err != nil || out != "first 1\nfirst 2\n" {
		t.Fatalf("previous after restart: %q %v", out, err)
	}
}

func TestGetContainerLogsTerminatedForGood(t *testing.T) {
	e := newLogsEnv(t, v1.RestartPolicyNever)
	id := e.sync()
	e.write(id, runtimeapi.Stdout, "done\n")
	if err := e.cri.ExitContainer(id, 0, ""); err != nil {
		t.Fatal(err)
	}
	out, _, err := e.logs(&v1.PodLogOptions{Follow: true})
	if err != nil || out != "done\n" {
		t.Fatalf("follow of a terminated container: %q %v", out, err)
	}
	if _, _, err := e.logs(&v1.PodLogOptions{Previous: true}); !errors.Is(err, kuberuntime.ErrNoPreviousInstance) {
		t.Fatalf("previous of a container that won't restart: %v", err)
	}
}

func TestGetContainerLogsRefusals(t *testing.T) {
	e := newLogsEnv(t, v1.RestartPolicyAlways)
	if _, _, err := e.logs(nil); !errors.Is(err, kuberuntime.ErrContainerNotStarted) {
		t.Fatalf("before the first start: %v", err)
	}
	e.sync()
	var out bytes.Buffer
	if err := e.m.GetContainerLogs(t.Context(), e.pod, "nope", nil, &out, &out); !errors.Is(err, kuberuntime.ErrContainerNotFound) {
		t.Fatalf("unknown container: %v", err)
	}
	for _, o := range []*v1.PodLogOptions{
		{TailLines: ptr.To[int64](-1)},
		{LimitBytes: ptr.To[int64](0)},
		{SinceSeconds: ptr.To[int64](0)},
		{SinceSeconds: ptr.To[int64](5), SinceTime: &metav1.Time{Time: e.clk.Now()}},
		{Stream: ptr.To("Both")},
		{Stream: ptr.To(v1.LogStreamStdout), TailLines: ptr.To[int64](3)},
	} {
		if _, _, err := e.logs(o); !errors.Is(err, kuberuntime.ErrInvalidLogOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestGetContainerLogsFollowStopsWhenTheContainerExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newLogsEnv(t, v1.RestartPolicyNever)
		id := e.sync()
		e.write(id, runtimeapi.Stdout, "one\n")
		var out lockedBuf
		done := make(chan error, 1)
		go func() {
			done <- e.m.GetContainerLogs(context.WithoutCancel(t.Context()), e.pod, "app", &v1.PodLogOptions{Follow: true}, &out, &out)
		}()
		synctest.Wait()
		if out.String() != "one\n" {
			t.Fatalf("followed %q", out.String())
		}
		e.write(id, runtimeapi.Stdout, "two\n")
		e.clk.Step(time.Second)
		synctest.Wait()
		if out.String() != "one\ntwo\n" {
			t.Fatalf("followed %q", out.String())
		}
		e.write(id, runtimeapi.Stdout, "three\n")
		if err := e.cri.ExitContainer(id, 0, ""); err != nil {
			t.Fatal(err)
		}
		e.clk.Step(time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil || out.String() != "one\ntwo\nthree\n" {
				t.Fatalf("follow ended: %q %v", out.String(), err)
			}
		default:
			t.Fatal("still following an exited container")
		}
	})
}

func TestGarbageCollectRemovesDeadInstancesLogs(t *testing.T) {
	e := newLogsEnv(t, v1.RestartPolicyAlways)
	var paths []string
	for i := range 3 {
		id := e.sync()
		st, err := e.cri.ContainerStatus(t.Context(), id, false)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, st.GetStatus().GetLogPath())
		e.write(id, runtimeapi.Stdout, "instance\n")
		if i < 2 {
			if err := e.cri.ExitContainer(id, 1, ""); err != nil {
				t.Fatal(err)
			}
			e.clk.Step(5 * time.Minute) // past the crash-loop back-off
		}
	}
	// A rotated file of the first instance goes too.
	if err := os.WriteFile(paths[0]+".20261126-120000.gz", []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := e.m.GarbageCollect(t.Context(), kubetypes.GCPolicy{MaxPerPodContainer: 1}, nil, false); err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if gone := errors.Is(err, os.ErrNotExist); gone != (i == 0) {
			t.Errorf("instance %d log %s: stat %v", i, filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(paths[0] + ".20261126-120000.gz"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rotated file of a removed instance: %v", err)
	}
	// The previous instance's log is still there for previous=true.
	out, _, err := e.logs(&v1.PodLogOptions{Previous: true})
	if err != nil || out != "instance\n" {
		t.Fatalf("previous after GC: %q %v", out, err)
	}
}

func TestRestartCountContinuesAfterLogsOnDisk(t *testing.T) {
	e := newLogsEnv(t, v1.RestartPolicyAlways)
	// Logs of instances the runtime no longer knows (a reboot wiped it).
	dir := filepath.Join(e.root, "default_logs_uid-logs", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "3.log.20261126-110000.gz", "x.log", "12"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	id := e.sync()
	st, err := e.cri.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetStatus().GetLogPath(); got != filepath.Join(dir, "4.log") {
		t.Fatalf("log path %s, want 4.log after the files on disk", got)
	}
}
