package runtimetest

import (
	"context"
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunConformance checks the CRI behaviour kuberuntime.Manager relies on.
func RunConformance(t *testing.T, newEndpoint Factory) {
	t.Run("SandboxLifecycle", func(t *testing.T) { testSandboxLifecycle(t, newEndpoint(t)) })
	t.Run("ContainerLifecycle", func(t *testing.T) { testContainerLifecycle(t, newEndpoint(t)) })
	t.Run("ExitCode", func(t *testing.T) { testExitCode(t, newEndpoint(t)) })
	t.Run("StopTimeout", func(t *testing.T) { testStopTimeout(t, newEndpoint(t)) })
	t.Run("Images", func(t *testing.T) { testImages(t, newEndpoint(t)) })
	t.Run("ExecSync", func(t *testing.T) { testExecSync(t, newEndpoint(t)) })
}

func (e *Endpoint) sandboxConfig(t *testing.T) *runtimeapi.PodSandboxConfig {
	pod := e.newPod(t, "Always", 1)
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		LogDirectory: e.LogRoot,
		Labels: map[string]string{
			"io.kubernetes.pod.uid": string(pod.UID),
			"nodekit.io/test":       "conformance",
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: hostNetwork(),
			},
		},
	}
}

func (e *Endpoint) runSandbox(t *testing.T, ctx context.Context) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := e.sandboxConfig(t)
	id, err := e.Runtime.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = e.Runtime.StopPodSandbox(cctx, id)
		_ = e.Runtime.RemovePodSandbox(cctx, id)
	})
	return id, cfg
}

func (e *Endpoint) createContainer(t *testing.T, ctx context.Context, sandboxID string, sb *runtimeapi.PodSandboxConfig, name string, cmd ...string) string {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: e.BusyboxImage, UserSpecifiedImage: e.BusyboxImage},
		Command:  cmd,
		LogPath:  name + ".log",
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNetwork()},
		},
		Labels: map[string]string{
			"io.kubernetes.pod.uid":        sb.Labels["io.kubernetes.pod.uid"],
			"io.kubernetes.container.name": name,
		},
	}
	id, err := e.Runtime.CreateContainer(ctx, sandboxID, cfg, sb)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	return id
}

func (e *Endpoint) containerState(t *testing.T, ctx context.Context, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := e.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return resp.GetStatus()
}

func testSandboxLifecycle(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	id, cfg := e.runSandbox(t, ctx)

	list, err := e.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": cfg.Labels["io.kubernetes.pod.uid"]},
	})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	if len(list) != 1 || list[0].Id != id || list[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("ListPodSandbox by label = %v, want the one ready sandbox %s", list, id)
	}
	if list[0].GetMetadata().GetUid() != cfg.Metadata.Uid {
		t.Errorf("metadata uid = %q, want %q", list[0].GetMetadata().GetUid(), cfg.Metadata.Uid)
	}
	other, err := e.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": "no-such-pod"},
	})
	if err != nil || len(other) != 0 {
		t.Fatalf("ListPodSandbox for another uid = %v, %v; want none", other, err)
	}

	st, err := e.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox state = %v, want READY", st.GetStatus().GetState())
	}
	if st.GetStatus().GetCreatedAt() == 0 {
		t.Errorf("sandbox CreatedAt is zero")
	}

	if err := e.Runtime.StopPodSandbox(ctx, id); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	st, err = e.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus after stop: %v", err)
	}
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox state after stop = %v, want NOTREADY", st.GetStatus().GetState())
	}
	if err := e.Runtime.RemovePodSandbox(ctx, id); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := e.Runtime.PodSandboxStatus(ctx, id, false); !isNotFound(err) {
		t.Fatalf("PodSandboxStatus of a removed sandbox: err = %v, want NotFound", err)
	}
}

func testContainerLifecycle(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	sid, sb := e.runSandbox(t, ctx)
	id := e.createContainer(t, ctx, sid, sb, "sleeper", "sleep", "3600")
	if s := e.containerState(t, ctx, id); s.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("state after create = %v, want CREATED", s.State)
	}
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	s := e.containerState(t, ctx, id)
	if s.State != runtimeapi.ContainerState_CONTAINER_RUNNING || s.StartedAt == 0 {
		t.Fatalf("state after start = %v (startedAt %d), want RUNNING", s.State, s.StartedAt)
	}
	if s.GetMetadata().GetName() != "sleeper" || s.GetLabels()["io.kubernetes.container.name"] != "sleeper" {
		t.Errorf("metadata/labels not kept: %v %v", s.GetMetadata(), s.GetLabels())
	}
	list, err := e.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		PodSandboxId: sid,
		State:        &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil || len(list) != 1 || list[0].Id != id {
		t.Fatalf("ListContainers(sandbox, running) = %v, %v; want [%s]", list, err, id)
	}
	if err := e.Runtime.RemoveContainer(ctx, id); err == nil {
		// containerd refuses to remove a running container unless forced; the
		// fake too. Either way it must still be there or be gone, not half.
		if _, err := e.Runtime.ContainerStatus(ctx, id, false); err != nil && !isNotFound(err) {
			t.Fatalf("ContainerStatus after RemoveContainer of a running container: %v", err)
		}
		return
	}
	if err := e.Runtime.StopContainer(ctx, id, 0); err != nil {
		t.Fatalf("StopContainer(0): %v", err)
	}
	s = e.containerState(t, ctx, id)
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Fatalf("after StopContainer(0): state %v exit %d, want EXITED 137", s.State, s.ExitCode)
	}
	if err := e.Runtime.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := e.Runtime.ContainerStatus(ctx, id, false); !isNotFound(err) {
		t.Fatalf("ContainerStatus of a removed container: err = %v, want NotFound", err)
	}
}

func testExitCode(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	sid, sb := e.runSandbox(t, ctx)
	id := e.createContainer(t, ctx, sid, sb, "exits", "sh", "-c", "exit 3")
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	var s *runtimeapi.ContainerStatus
	e.eventually(t, 30*time.Second, "container exits", func() (bool, string) {
		s = e.containerState(t, ctx, id)
		return s.State == runtimeapi.ContainerState_CONTAINER_EXITED, s.State.String()
	})
	if s.ExitCode != 3 {
		t.Fatalf("exit code = %d, want 3", s.ExitCode)
	}
	// containerd stamps StartedAt after the task started, so a process that
	// exits at once may show FinishedAt a little before StartedAt.
	if s.FinishedAt < s.CreatedAt || s.StartedAt < s.CreatedAt || s.FinishedAt < s.StartedAt-int64(time.Second) {
		t.Fatalf("timestamps out of order: created %d started %d finished %d", s.CreatedAt, s.StartedAt, s.FinishedAt)
	}
}

func testStopTimeout(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	sid, sb := e.runSandbox(t, ctx)
	ignores := e.createContainer(t, ctx, sid, sb, "ignores", "sh", "-c", "trap '' TERM; sleep 3600")
	handles := e.createContainer(t, ctx, sid, sb, "handles", "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait")
	for _, id := range []string{ignores, handles} {
		if err := e.Runtime.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer: %v", err)
		}
	}
	// Give the shell a moment to install its trap (real runtimes only).
	e.eventually(t, 10*time.Second, "trap installed", func() (bool, string) {
		s := e.containerState(t, ctx, handles)
		return s.State == runtimeapi.ContainerState_CONTAINER_RUNNING && e.Clock.Since(time.Unix(0, s.StartedAt)) >= time.Second, s.State.String()
	})

	var err error
	took := e.drive(t, 30*time.Second, func() { err = e.Runtime.StopContainer(ctx, handles, 10) })
	if err != nil {
		t.Fatalf("StopContainer(handles): %v", err)
	}
	if took > time.Second+e.Slack {
		t.Errorf("a SIGTERM-handling container took %v to stop, want at most 1s", took)
	}
	if s := e.containerState(t, ctx, handles); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 0 {
		t.Errorf("SIGTERM-handling container: state %v exit %d, want EXITED 0", s.State, s.ExitCode)
	}

	took = e.drive(t, 30*time.Second, func() { err = e.Runtime.StopContainer(ctx, ignores, 2) })
	if err != nil {
		t.Fatalf("StopContainer(ignores): %v", err)
	}
	if took < 2*time.Second || took > 2*time.Second+e.Slack {
		t.Errorf("a SIGTERM-ignoring container stopped after %v, want 2s (+%v)", took, e.Slack)
	}
	if s := e.containerState(t, ctx, ignores); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		t.Errorf("SIGTERM-ignoring container: state %v exit %d, want EXITED 137", s.State, s.ExitCode)
	}
}

func testImages(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	st, err := e.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: e.BusyboxImage}, false)
	if err != nil || st.GetImage() == nil || st.GetImage().GetId() == "" {
		t.Fatalf("ImageStatus(%s) = %v, %v; want the image", e.BusyboxImage, st, err)
	}
	st, err = e.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: e.MissingImage}, false)
	if err != nil {
		t.Fatalf("ImageStatus of a missing image must not be an error, got %v", err)
	}
	if st.GetImage() != nil {
		t.Fatalf("ImageStatus of a missing image = %v, want nil", st.GetImage())
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if ref, err := e.Images.PullImage(pctx, &runtimeapi.ImageSpec{Image: e.MissingImage}, nil, nil); err == nil {
		t.Fatalf("PullImage of a missing image succeeded (%q)", ref)
	}
}

func testExecSync(t *testing.T, e *Endpoint) {
	ctx := t.Context()
	sid, sb := e.runSandbox(t, ctx)
	id := e.createContainer(t, ctx, sid, sb, "exec", "sleep", "3600")
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if _, _, err := e.Runtime.ExecSync(ctx, id, []string{"true"}, 10*time.Second); err != nil {
		t.Fatalf("ExecSync(true): %v", err)
	}
	_, _, err := e.Runtime.ExecSync(ctx, id, []string{"false"}, 10*time.Second)
	var exit interface{ ExitStatus() int }
	if !errors.As(err, &exit) || exit.ExitStatus() != 1 {
		t.Fatalf("ExecSync(false) = %v, want an exit-status error with status 1", err)
	}
	_ = e.Runtime.StopContainer(ctx, id, 0)
}

func hostNetwork() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}
