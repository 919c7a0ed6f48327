//go:build e2e

package remote_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// e2eClient connects to the real runtime named by NODEKIT_CRI_ENDPOINT.
func e2eClient(t *testing.T) *remote.Client {
	t.Helper()
	ep := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if ep == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT is not set: start containerd with `bash hack/containerd.sh start` " +
			"and source its env (set -a; . /tmp/nodekit-containerd/env; set +a)")
	}
	c := newClient(t, remote.Config{Endpoint: ep, ConnectTimeout: 10 * time.Second})
	if err := c.Connect(t.Context()); err != nil {
		t.Fatalf("Connect to %s: %v", ep, err)
	}
	return c
}

func e2eEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func TestE2EVersionAndStatus(t *testing.T) {
	c := e2eClient(t)
	ctx := t.Context()
	v, err := c.Version(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.GetRuntimeApiVersion() != "v1" {
		t.Errorf("RuntimeApiVersion %q, want v1 (runtime %s %s)", v.GetRuntimeApiVersion(), v.GetRuntimeName(), v.GetRuntimeVersion())
	}
	t.Logf("runtime %s %s, CRI %s", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion())

	st, err := c.Status(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.GetType() == runtimeapi.RuntimeReady {
			ready = cond.GetStatus()
		}
	}
	if !ready {
		t.Errorf("RuntimeReady is not true: %v", st.GetStatus().GetConditions())
	}
}

// containerd 1.6 lacks RuntimeConfig and GetContainerEvents: both must come
// back as ErrUnimplemented so callers can fall back. A runtime that has them
// must answer them.
func TestE2EOptionalMethods(t *testing.T) {
	c := e2eClient(t)
	v, err := c.Version(t.Context(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	old := v.GetRuntimeName() == "containerd" && strings.HasPrefix(strings.TrimPrefix(v.GetRuntimeVersion(), "v"), "1.6.")

	_, err = c.RuntimeConfig(t.Context())
	t.Logf("RuntimeConfig on %s %s: %v", v.GetRuntimeName(), v.GetRuntimeVersion(), err)
	switch {
	case old && !errors.Is(err, remote.ErrUnimplemented):
		t.Errorf("RuntimeConfig on containerd %s: got %v, want ErrUnimplemented", v.GetRuntimeVersion(), err)
	case !old && err != nil && !errors.Is(err, remote.ErrUnimplemented):
		t.Errorf("RuntimeConfig: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err = c.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse, 16), nil)
	t.Logf("GetContainerEvents on %s %s: %v", v.GetRuntimeName(), v.GetRuntimeVersion(), err)
	switch {
	case old && !errors.Is(err, remote.ErrUnimplemented):
		t.Errorf("GetContainerEvents on containerd %s: got %v, want ErrUnimplemented", v.GetRuntimeVersion(), err)
	case !old && err != nil && !errors.Is(err, remote.ErrUnimplemented):
		t.Errorf("GetContainerEvents: %v", err)
	}
}

func TestE2EListsAndImages(t *testing.T) {
	c := e2eClient(t)
	ctx := t.Context()
	if _, err := c.ListPodSandbox(ctx, nil); err != nil {
		t.Errorf("ListPodSandbox: %v", err)
	}
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Errorf("ListContainers: %v", err)
	}
	if _, err := c.ImageFsInfo(ctx); err != nil {
		t.Errorf("ImageFsInfo: %v", err)
	}
	pause := e2eEnv("NODEKIT_PAUSE_IMAGE", "localhost/nodekit/pause:1")
	st, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pause}, false)
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", pause, err)
	}
	if st.GetImage() == nil {
		t.Fatalf("image %s is not present (hack/containerd.sh start imports it)", pause)
	}
	if st.GetImage().GetId() == "" {
		t.Errorf("image %s has no ID", pause)
	}
	missing, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "localhost/nodekit/does-not-exist:1"}, false)
	if err != nil || missing.GetImage() != nil {
		t.Errorf("ImageStatus of a missing image = %v, %v; want no image, no error", missing, err)
	}
}

func TestE2ENotFound(t *testing.T) {
	c := e2eClient(t)
	ctx := t.Context()
	_, err := c.ContainerStatus(ctx, "nodekit-no-such-container", false)
	if !remote.IsNotFound(err) || !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("ContainerStatus of an unknown ID: %v, want not found", err)
	}
	_, err = c.PodSandboxStatus(ctx, "nodekit-no-such-sandbox", false)
	if !remote.IsNotFound(err) {
		t.Errorf("PodSandboxStatus of an unknown ID: %v, want not found", err)
	}
	if err := c.StartContainer(ctx, "nodekit-no-such-container"); !remote.IsNotFound(err) {
		t.Errorf("StartContainer of an unknown ID: %v, want not found", err)
	}
}

// A host-network sandbox with one busybox container: create, start, exec
// (exit 0 and non-zero), stop, remove.
func TestE2ELifecycle(t *testing.T) {
	c := e2eClient(t)
	ctx := t.Context()
	busybox := e2eEnv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	if st, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: busybox}, false); err != nil || st.GetImage() == nil {
		t.Fatalf("image %s is not present: %v", busybox, err)
	}
	uid := "remote-e2e-" + strings.ReplaceAll(t.Name(), "/", "-")
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "remote-e2e", Namespace: "nodekit-e2e", Uid: uid},
		LogDirectory: t.TempDir(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.StopPodSandbox(ctx, sb); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if err := c.RemovePodSandbox(ctx, sb); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})

	ctr, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"},
		Image:    &runtimeapi.ImageSpec{Image: busybox},
		Command:  []string{"sleep", "3600"},
		LogPath:  "sleeper.log",
	}, sbConfig)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, ctr); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	st, err := c.ContainerStatus(ctx, ctr, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ContainerStatus: %v, %v", st.GetStatus().GetState(), err)
	}

	out, _, err := c.ExecSync(ctx, ctr, []string{"echo", "hello"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Errorf("ExecSync echo: %q, %v", out, err)
	}
	_, _, err = c.ExecSync(ctx, ctr, []string{"sh", "-c", "echo oops >&2; exit 7"}, 10*time.Second)
	var exit *remote.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 || !strings.Contains(string(exit.Stderr), "oops") {
		t.Errorf("ExecSync exit 7: %v", err)
	}

	if err := c.StopContainer(ctx, ctr, 1); err != nil {
		t.Errorf("StopContainer: %v", err)
	}
	st, err = c.ContainerStatus(ctx, ctr, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after stop: %v, %v", st.GetStatus().GetState(), err)
	}
	if err := c.RemoveContainer(ctx, ctr); err != nil {
		t.Errorf("RemoveContainer: %v", err)
	}
	if _, err := c.ContainerStatus(ctx, ctr, false); !remote.IsNotFound(err) {
		t.Errorf("ContainerStatus after remove: %v, want not found", err)
	}
}
