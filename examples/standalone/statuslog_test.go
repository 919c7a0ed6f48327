package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLogSinkLines(t *testing.T) {
	var buf bytes.Buffer
	s := newLogSink(&buf)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	s.now = func() time.Time { return at }
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1"}}
	fin := metav1.NewTime(at.Add(-time.Millisecond))
	st := v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{
		Name: "c", ContainerID: "containerd://abc",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, FinishedAt: fin, Reason: "Error"}},
	}}}
	if err := s.SyncPodStatus(t.Context(), pod, st); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if !s.mem.Deleted("u1") {
		t.Error("the memory sink did not see the deletion")
	}
	var lines []StatusLogLine
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l StatusLogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %s", len(lines), buf.String())
	}
	l := lines[0]
	if !l.Time.Equal(at) || l.Name != "p" || l.UID != "u1" || l.Phase != v1.PodSucceeded || len(l.Containers) != 1 {
		t.Fatalf("line 1: %+v", l)
	}
	c := l.Containers[0]
	if c.State != "terminated" || c.ExitCode != 3 || c.FinishedAt == nil || !c.FinishedAt.Equal(fin.Time) || c.ContainerID != "containerd://abc" {
		t.Errorf("container: %+v", c)
	}
	if !lines[1].Deleted || lines[1].UID != "u1" {
		t.Errorf("line 2: %+v", lines[1])
	}
	if err := s.SyncPodStatus(t.Context(), nil, st); err == nil {
		t.Error("a nil pod was accepted")
	}
}

// TestRunFakeStatusLogRelistPeriod runs the example on the fake runtime
// with --status-log and --relist-period: the log shows every shipped pod's
// statuses, the crashing pod's container terminated.
func TestRunFakeStatusLogRelistPeriod(t *testing.T) {
	root := t.TempDir()
	logPath := filepath.Join(root, "status.log")
	o := options{root: root, nodeName: "test", duration: 4 * time.Second, statusLog: logPath, relistPeriod: 50 * time.Millisecond, evented: true}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	terminated := false
	for _, raw := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l StatusLogLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if l.Time.IsZero() {
			t.Errorf("no time: %q", raw)
		}
		names[l.Name] = true
		for _, c := range l.Containers {
			terminated = terminated || (c.State == "terminated" && c.FinishedAt != nil) || c.LastTerminatedID != ""
		}
	}
	if len(names) != 4 {
		t.Errorf("log names %d pods, want 4: %v", len(names), names)
	}
	if !terminated {
		t.Errorf("no terminated container in the log (the crasher and the job exit):\n%s", data)
	}
}

func TestRelistPeriodFlags(t *testing.T) {
	ctx := t.Context()
	if err := run(ctx, options{root: t.TempDir(), nodeName: "t", relistPeriod: -time.Second}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative period: %v", err)
	}
	err := run(ctx, options{root: t.TempDir(), nodeName: "t", relistPeriod: time.Second, evented: true, eventedSet: true})
	if err == nil || !strings.Contains(err.Error(), "--evented-pleg=false") {
		t.Errorf("relist period with an explicit evented PLEG: %v", err)
	}
}
