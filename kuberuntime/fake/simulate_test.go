package fake

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestProcessesFollowTheClock(t *testing.T) {
	r, fc := newFake(t, Config{})
	sb := mustRun(t, r, podConfig("p", true, nil))
	sleeper := mustStart(t, r, sb, ctrConfig("sleeper", "busybox", "sleep", "5"))
	script := mustStart(t, r, sb, ctrConfig("script", "busybox", "sh", "-c", "sleep 2; exit 3"))
	quick := mustStart(t, r, sb, ctrConfig("quick", "busybox", "false"))
	annotated := ctrConfig("annotated", "nginx")
	annotated.Annotations = map[string]string{BehaviorAnnotation("annotated"): "exit=4,after=1s"}
	ann := mustStart(t, r, sb, annotated)

	wantState(t, ctrStatus(t, r, quick), runtimeapi.ContainerState_CONTAINER_EXITED, 1, "Error")
	wantState(t, ctrStatus(t, r, sleeper), runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "")
	fc.Step(1500 * time.Millisecond)
	st := ctrStatus(t, r, ann)
	wantState(t, st, runtimeapi.ContainerState_CONTAINER_EXITED, 4, "Error")
	if st.FinishedAt != t0().Add(time.Second).UnixNano() {
		t.Fatalf("finishedAt %v, want start+1s", time.Unix(0, st.FinishedAt))
	}
	wantState(t, ctrStatus(t, r, script), runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "")
	fc.Step(4 * time.Second)
	wantState(t, ctrStatus(t, r, script), runtimeapi.ContainerState_CONTAINER_EXITED, 3, "Error")
	st = ctrStatus(t, r, sleeper)
	wantState(t, st, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed")
	if st.FinishedAt-st.StartedAt != int64(5*time.Second) {
		t.Fatalf("sleeper ran %v", time.Duration(st.FinishedAt-st.StartedAt))
	}
	// ExitContainer is an immediate crash.
	forever := mustStart(t, r, sb, ctrConfig("forever", "busybox"))
	if err := r.ExitContainer(forever, 2, ""); err != nil {
		t.Fatal(err)
	}
	wantState(t, ctrStatus(t, r, forever), runtimeapi.ContainerState_CONTAINER_EXITED, 2, "Error")
}

func TestStopHandlesVersusIgnores(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", true, nil))
	trap := mustStart(t, r, sb, ctrConfig("trap", "busybox", "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"))
	trap143 := ctrConfig("trap143", "busybox")
	trap143.Annotations = map[string]string{BehaviorAnnotation("trap143"): "sigterm=handle:143"}
	t143 := mustStart(t, r, sb, trap143)
	pause := mustStart(t, r, sb, ctrConfig("pause", "registry.k8s.io/pause:3.10"))

	// Handlers exit at once, with their code.
	for id, code := range map[string]int32{trap: 0, t143: 143, pause: 0} {
		if err := r.StopContainer(ctx, id, 30); err != nil {
			t.Fatal(err)
		}
		st := ctrStatus(t, r, id)
		if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != code || st.FinishedAt != t0().UnixNano() {
			t.Fatalf("%s: %v %d at %d", st.Metadata.Name, st.State, st.ExitCode, st.FinishedAt)
		}
	}

	// An ignoring process is killed only when the timeout has passed on the clock.
	sleeper := mustStart(t, r, sb, ctrConfig("sleeper", "busybox", "sh", "-c", "trap '' TERM; sleep 3600"))
	done := make(chan error, 1)
	go func() { done <- r.StopContainer(ctx, sleeper, 30) }()
	waitWaiters(t, fc, 1)
	fc.Step(29 * time.Second)
	wantState(t, ctrStatus(t, r, sleeper), runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "")
	select {
	case err := <-done:
		t.Fatalf("StopContainer returned before the timeout: %v", err)
	default:
	}
	fc.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := ctrStatus(t, r, sleeper)
	wantState(t, st, runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error")
	if st.FinishedAt != t0().Add(30*time.Second).UnixNano() {
		t.Fatalf("killed at %v", time.Unix(0, st.FinishedAt))
	}
	if fc.HasWaiters() {
		t.Fatal("StopContainer left a timer on the clock")
	}

	// A process that exits on its own during the grace period ends the wait early.
	short := mustStart(t, r, sb, ctrConfig("short", "busybox", "sh", "-c", "trap '' TERM; sleep 5"))
	go func() { done <- r.StopContainer(ctx, short, 30) }()
	waitWaiters(t, fc, 1)
	fc.Step(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantState(t, ctrStatus(t, r, short), runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed")

	// Timeout 0 kills at once.
	now := mustStart(t, r, sb, ctrConfig("now", "busybox", "sleep", "3600"))
	if err := r.StopContainer(ctx, now, 0); err != nil {
		t.Fatal(err)
	}
	wantState(t, ctrStatus(t, r, now), runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error")

	// ctx ends the wait; the pending kill still happens at the deadline.
	cctx, cancel := context.WithCancel(ctx)
	late := mustStart(t, r, sb, ctrConfig("late", "busybox", "sh", "-c", "trap '' TERM; sleep 3600"))
	go func() { done <- r.StopContainer(cctx, late, 10) }()
	waitWaiters(t, fc, 1)
	cancel()
	if err := <-done; codeOf(err) != codes.Canceled {
		t.Fatalf("cancelled stop: %v", err)
	}
	wantState(t, ctrStatus(t, r, late), runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "")
	fc.Step(10 * time.Second)
	wantState(t, ctrStatus(t, r, late), runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error")

	// Removing the sandbox during a stop ends the stop.
	gone := mustStart(t, r, sb, ctrConfig("gone", "busybox"))
	go func() { done <- r.StopContainer(ctx, gone, 60) }()
	waitWaiters(t, fc, 1)
	if err := r.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOOMAndStats(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", false, nil))
	cfg := ctrConfig("hog", "busybox")
	cfg.Annotations = map[string]string{BehaviorAnnotation("hog"): "memory=10Mi+1Mi/s,cpu=250m"}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 15 << 20}}
	hog := mustStart(t, r, sb, cfg)
	idle := mustStart(t, r, sb, ctrConfig("idle", "busybox"))

	fc.Step(2 * time.Second)
	st, err := r.ContainerStats(ctx, hog)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Memory.WorkingSetBytes.Value; got != 12<<20 {
		t.Fatalf("working set %d, want 12Mi", got)
	}
	if got := st.Cpu.UsageCoreNanoSeconds.Value; got != uint64(500*time.Millisecond) {
		t.Fatalf("cpu %d, want 0.5s", got)
	}
	if st.Cpu.UsageNanoCores.Value != 250_000_000 || st.Memory.AvailableBytes.Value != 3<<20 {
		t.Fatalf("nano cores %d available %d", st.Cpu.UsageNanoCores.Value, st.Memory.AvailableBytes.Value)
	}
	idleStats, _ := r.ContainerStats(ctx, idle)
	if idleStats.Cpu.UsageCoreNanoSeconds.Value != uint64(20*time.Millisecond) || idleStats.Memory.WorkingSetBytes.Value != 2<<20 {
		t.Fatalf("default stats: cpu %d mem %d", idleStats.Cpu.UsageCoreNanoSeconds.Value, idleStats.Memory.WorkingSetBytes.Value)
	}
	ps, err := r.PodSandboxStats(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Linux.Memory.WorkingSetBytes.Value != 14<<20 || len(ps.Linux.Containers) != 2 {
		t.Fatalf("pod stats mem %d, %d containers", ps.Linux.Memory.WorkingSetBytes.Value, len(ps.Linux.Containers))
	}

	fc.Step(10 * time.Second) // the limit is reached 5s after start
	s := ctrStatus(t, r, hog)
	wantState(t, s, runtimeapi.ContainerState_CONTAINER_EXITED, 137, "OOMKilled")
	if s.FinishedAt != t0().Add(5*time.Second).UnixNano() {
		t.Fatalf("OOM at %v", time.Duration(s.FinishedAt-t0().UnixNano()))
	}
	st, _ = r.ContainerStats(ctx, hog)
	if st.Cpu.UsageCoreNanoSeconds.Value != uint64(1250*time.Millisecond) || st.Memory.WorkingSetBytes.Value != 0 {
		t.Fatalf("exited stats: cpu %d mem %d", st.Cpu.UsageCoreNanoSeconds.Value, st.Memory.WorkingSetBytes.Value)
	}
	list, _ := r.ListContainerStats(ctx, nil)
	if len(list) != 1 || list[0].Attributes.Id != idle {
		t.Fatalf("ListContainerStats: %d", len(list))
	}
	pl, _ := r.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{"app": "p"}})
	if len(pl) != 1 || pl[0].Linux.Cpu.UsageCoreNanoSeconds.Value != uint64(1250*time.Millisecond+120*time.Millisecond) {
		t.Fatalf("ListPodSandboxStats: %v", pl)
	}

	// Lowering the limit below the working set OOM-kills at once.
	if err := r.UpdateContainerResources(ctx, idle, &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	s = ctrStatus(t, r, idle)
	wantState(t, s, runtimeapi.ContainerState_CONTAINER_EXITED, 137, "OOMKilled")
	if s.FinishedAt != fc.Now().UnixNano() {
		t.Fatal("OOM from a lowered limit is not at the update time")
	}
	_, err = r.ContainerStats(ctx, "nope")
	wantCode(t, err, codes.NotFound, ErrNotFound)
}

func TestStopWaitsOnARealClock(t *testing.T) {
	r, err := New(Config{}) // real clock
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", true, nil))
	id := mustStart(t, r, sb, ctrConfig("c", "busybox", "sh", "-c", "trap '' TERM; sleep 3600"))
	start := time.Now()
	if err := r.StopContainer(ctx, id, 1); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("StopContainer returned after %v, before its 1s timeout", waited)
	}
	wantState(t, ctrStatus(t, r, id), runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error")
}
