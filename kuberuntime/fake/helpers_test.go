package fake

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func t0() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

func newFake(t testing.TB, cfg Config) (*Runtime, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(t0())
	if cfg.Clock == nil {
		cfg.Clock = fc
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r, fc
}

func podConfig(name string, hostNetwork bool, annotations map[string]string) *runtimeapi.PodSandboxConfig {
	c := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "app": name},
		Annotations:  annotations,
		LogDirectory: "/var/log/pods/" + name,
	}
	if hostNetwork {
		c.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}}
	}
	return c
}

func ctrConfig(name, image string, command ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  command,
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		LogPath:  name + "/0.log",
	}
}

func mustRun(t testing.TB, r *Runtime, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	id, err := r.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	return id
}

// mustStart creates and starts a container.
func mustStart(t testing.TB, r *Runtime, sb string, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	id, err := r.CreateContainer(t.Context(), sb, cfg, nil)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := r.StartContainer(t.Context(), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

func ctrStatus(t testing.TB, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := r.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

func wantCode(t testing.TB, err error, code codes.Code, sentinel error) {
	t.Helper()
	if got := grpcstatus.Code(err); got != code {
		t.Fatalf("error %v: code %v, want %v", err, got, code)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
}

func wantState(t testing.TB, st *runtimeapi.ContainerStatus, state runtimeapi.ContainerState, code int32, reason string) {
	t.Helper()
	if st.State != state || st.ExitCode != code || st.Reason != reason {
		t.Fatalf("container %s: state %v exit %d reason %q, want %v %d %q", st.Metadata.Name, st.State, st.ExitCode, st.Reason, state, code, reason)
	}
}

// waitWaiters waits (without sleeping) until something waits on the fake clock.
func waitWaiters(t testing.TB, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d clock waiters (have %d)", n, fc.Waiters())
		}
		runtime.Gosched()
	}
}

func codeOf(err error) codes.Code { return grpcstatus.Code(err) }

// waitSubscribers waits (without sleeping) until n event streams are subscribed.
func waitSubscribers(t testing.TB, r *Runtime, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		have := len(r.subs)
		r.mu.Unlock()
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d event subscribers (have %d)", n, have)
		}
		runtime.Gosched()
	}
}
