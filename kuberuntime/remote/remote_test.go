package remote_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

var (
	_ cri.RuntimeService                       = (*remote.Client)(nil)
	_ cri.ImageManagerService                  = (*remote.Client)(nil)
	_ kuberuntime.RuntimeService               = (*remote.Client)(nil)
	_ kuberuntime.ImageService                 = (*remote.Client)(nil)
	_ utilexec.ExitError                       = (*remote.ExitError)(nil)
	_ interface{ GRPCStatus() *status.Status } = (*remote.StatusError)(nil)
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient makes a client for the socket at path, closed at the end of the test.
func newClient(t *testing.T, cfg remote.Config) *remote.Client {
	t.Helper()
	c, err := remote.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(t.Context()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestRoundTrip(t *testing.T) {
	srv := newTestServer()
	path := serveCRI(t, srv)
	c := newClient(t, remote.Config{Endpoint: "unix://" + path})
	ctx := t.Context()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	sbConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default"}}
	tests := []struct {
		method string
		call   func() (string, error) // returns a summary of the result
		detail string                 // what the server must have seen
		want   string                 // the summary the client must return
	}{
		{"Version", func() (string, error) {
			r, err := c.Version(ctx, "v1")
			return r.GetRuntimeName() + " " + r.GetRuntimeApiVersion(), err
		}, "v1", "testcri v1"},
		{"Status", func() (string, error) {
			r, err := c.Status(ctx, true)
			return fmt.Sprint(len(r.GetStatus().GetConditions())), err
		}, "true", "2"},
		{"RuntimeConfig", func() (string, error) {
			r, err := c.RuntimeConfig(ctx)
			return r.GetLinux().GetCgroupDriver().String(), err
		}, "", "CGROUPFS"},
		{"UpdateRuntimeConfig", func() (string, error) {
			return "", c.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.0.0.0/24"}})
		}, "10.0.0.0/24", ""},
		{"RunPodSandbox", func() (string, error) { return c.RunPodSandbox(ctx, sbConfig, "runc") }, "web|runc", "sb-web"},
		{"StopPodSandbox", func() (string, error) { return "", c.StopPodSandbox(ctx, "sb-1") }, "sb-1", ""},
		{"RemovePodSandbox", func() (string, error) { return "", c.RemovePodSandbox(ctx, "sb-2") }, "sb-2", ""},
		{"PodSandboxStatus", func() (string, error) {
			r, err := c.PodSandboxStatus(ctx, "sb-3", true)
			return r.GetStatus().GetId() + " " + r.GetStatus().GetState().String(), err
		}, "sb-3|true", "sb-3 SANDBOX_READY"},
		{"ListPodSandbox", func() (string, error) {
			r, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: "sb"})
			return fmt.Sprint(len(r)), err
		}, "sb", "2"},
		{"PortForward", func() (string, error) {
			r, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "sb-4", Port: []int32{80}})
			return r.GetUrl(), err
		}, "sb-4|[80]", "http://stream/pf/sb-4"},
		{"UpdatePodSandboxResources", func() (string, error) {
			_, err := c.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "sb-5"})
			return "", err
		}, "sb-5", ""},
		{"CreateContainer", func() (string, error) {
			return c.CreateContainer(ctx, "sb-1", &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}}, sbConfig)
		}, "sb-1|app|web", "ctr-app"},
		{"StartContainer", func() (string, error) { return "", c.StartContainer(ctx, "ctr-1") }, "ctr-1", ""},
		{"StopContainer", func() (string, error) { return "", c.StopContainer(ctx, "ctr-2", 30) }, "ctr-2|30", ""},
		{"RemoveContainer", func() (string, error) { return "", c.RemoveContainer(ctx, "ctr-3") }, "ctr-3", ""},
		{"ListContainers", func() (string, error) {
			r, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: "sb-1"})
			return fmt.Sprint(len(r)), err
		}, "sb-1", "1"},
		{"ContainerStatus", func() (string, error) {
			r, err := c.ContainerStatus(ctx, "ctr-4", false)
			return r.GetStatus().GetId() + " " + r.GetStatus().GetState().String(), err
		}, "ctr-4|false", "ctr-4 CONTAINER_RUNNING"},
		{"UpdateContainerResources", func() (string, error) {
			return "", c.UpdateContainerResources(ctx, "ctr-5", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512}})
		}, "ctr-5|512", ""},
		{"ReopenContainerLog", func() (string, error) { return "", c.ReopenContainerLog(ctx, "ctr-6") }, "ctr-6", ""},
		{"ExecSync", func() (string, error) {
			out, errOut, err := c.ExecSync(ctx, "ctr-7", []string{"echo", "hi"}, 1500*time.Millisecond)
			return string(out) + "/" + string(errOut), err
		}, "ctr-7|echo hi|2", "out/err"},
		{"Exec", func() (string, error) {
			r, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "ctr-8", Cmd: []string{"sh"}})
			return r.GetUrl(), err
		}, "ctr-8|sh", "http://stream/exec/ctr-8"},
		{"Attach", func() (string, error) {
			r, err := c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "ctr-9"})
			return r.GetUrl(), err
		}, "ctr-9", "http://stream/attach/ctr-9"},
		{"CheckpointContainer", func() (string, error) {
			return "", c.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "ctr-10", Location: "/tmp/cp.tar", Timeout: 5})
		}, "ctr-10|/tmp/cp.tar|5", ""},
		{"ContainerStats", func() (string, error) {
			r, err := c.ContainerStats(ctx, "ctr-11")
			return r.GetAttributes().GetId(), err
		}, "ctr-11", "ctr-11"},
		{"ListContainerStats", func() (string, error) {
			r, err := c.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: "ctr-1"})
			return fmt.Sprint(len(r)), err
		}, "ctr-1", "1"},
		{"PodSandboxStats", func() (string, error) {
			r, err := c.PodSandboxStats(ctx, "sb-6")
			return r.GetAttributes().GetId(), err
		}, "sb-6", "sb-6"},
		{"ListPodSandboxStats", func() (string, error) {
			r, err := c.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{Id: "sb-1"})
			return fmt.Sprint(len(r)), err
		}, "sb-1", "1"},
		{"ListMetricDescriptors", func() (string, error) {
			r, err := c.ListMetricDescriptors(ctx)
			if len(r) != 1 {
				return fmt.Sprint(len(r)), err
			}
			return r[0].GetName(), err
		}, "", "container_cpu_usage_seconds_total"},
		{"ListPodSandboxMetrics", func() (string, error) {
			r, err := c.ListPodSandboxMetrics(ctx)
			if len(r) != 1 {
				return fmt.Sprint(len(r)), err
			}
			return r[0].GetPodSandboxId(), err
		}, "", "sb-1"},
		{"ListImages", func() (string, error) {
			r, err := c.ListImages(ctx, &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
			return fmt.Sprint(len(r)), err
		}, "busybox", "2"},
		{"ImageStatus", func() (string, error) {
			r, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, true)
			return r.GetImage().GetId(), err
		}, "busybox|true", "sha256:busybox"},
		{"PullImage", func() (string, error) {
			return c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "pause"}, &runtimeapi.AuthConfig{Username: "me"}, sbConfig)
		}, "pause|me|web", "sha256:pause"},
		{"RemoveImage", func() (string, error) { return "", c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "old"}) }, "old", ""},
		{"ImageFsInfo", func() (string, error) {
			r, err := c.ImageFsInfo(ctx)
			return r.GetImageFilesystems()[0].GetFsId().GetMountpoint(), err
		}, "", "/var/lib/images"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			got, err := tt.call()
			if err != nil {
				t.Fatalf("%s: %v", tt.method, err)
			}
			if got != tt.want {
				t.Errorf("%s returned %q, want %q", tt.method, got, tt.want)
			}
			if d := srv.detail(tt.method); d != tt.detail {
				t.Errorf("server saw %s(%q), want %q", tt.method, d, tt.detail)
			}
		})
	}

	t.Run("ImageStatus of a missing image is not an error", func(t *testing.T) {
		r, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "missing"}, false)
		if err != nil || r.GetImage() != nil {
			t.Fatalf("ImageStatus(missing) = %v, %v; want no image and no error", r, err)
		}
	})
}

func TestInvalidResponses(t *testing.T) {
	srv := newTestServer()
	c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
	ctx := t.Context()
	calls := map[string]func() error{
		"RunPodSandbox": func() error {
			_, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "invalid"}}, "")
			return err
		},
		"CreateContainer": func() error {
			_, err := c.CreateContainer(ctx, "sb", &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "invalid"}}, nil)
			return err
		},
		"PodSandboxStatus": func() error { _, err := c.PodSandboxStatus(ctx, "invalid", false); return err },
		"ContainerStatus":  func() error { _, err := c.ContainerStatus(ctx, "invalid", false); return err },
		"ImageStatus": func() error {
			_, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "invalid"}, false)
			return err
		},
		"PullImage": func() error {
			_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "invalid"}, nil, nil)
			return err
		},
		"Exec":   func() error { _, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "invalid"}); return err },
		"Attach": func() error { _, err := c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "invalid"}); return err },
		"PortForward": func() error {
			_, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "invalid"})
			return err
		},
	}
	for method, call := range calls {
		err := call()
		if !errors.Is(err, remote.ErrInvalidResponse) {
			t.Errorf("%s: got %v, want ErrInvalidResponse", method, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "remote: "+method+" ") {
			t.Errorf("%s: error %q does not name the method", method, err)
		}
	}
}

func TestDeadlinesPerMethod(t *testing.T) {
	srv := newTestServer()
	c := newClient(t, remote.Config{
		Endpoint:    serveCRI(t, srv),
		CallTimeout: time.Hour, ListTimeout: 10 * time.Minute, PullTimeout: 3 * time.Hour,
	})
	ctx := t.Context()
	cases := []struct {
		method string
		call   func() error
		want   time.Duration
	}{
		{"StartContainer", func() error { return c.StartContainer(ctx, "c") }, time.Hour},
		{"RunPodSandbox", func() error { _, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, ""); return err }, 2 * time.Hour},
		{"StopContainer", func() error { return c.StopContainer(ctx, "c", 30) }, time.Hour + 30*time.Second},
		{"ExecSync", func() error { _, _, err := c.ExecSync(ctx, "c", []string{"true"}, 5*time.Second); return err }, time.Hour + 5*time.Second},
		{"CheckpointContainer", func() error {
			return c.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "c", Timeout: 60})
		}, time.Hour + time.Minute},
		{"ListContainers", func() error { _, err := c.ListContainers(ctx, nil); return err }, 10 * time.Minute},
		{"ContainerStatus", func() error { _, err := c.ContainerStatus(ctx, "c", false); return err }, 10 * time.Minute},
		{"Status", func() error { _, err := c.Status(ctx, false); return err }, 10 * time.Minute},
		{"ImageStatus", func() error { _, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "x"}, false); return err }, 10 * time.Minute},
		{"PullImage", func() error { _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "x"}, nil, nil); return err }, 3 * time.Hour},
		{"RemoveImage", func() error { return c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "x"}) }, time.Hour},
	}
	for _, tc := range cases {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		got := srv.deadline(tc.method)
		if got > tc.want+time.Second || got < tc.want-10*time.Second {
			t.Errorf("%s arrived with %v left, want about %v", tc.method, got, tc.want)
		}
	}

	// A caller's shorter deadline wins.
	short, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.StartContainer(short, "c"); err != nil {
		t.Fatal(err)
	}
	if got := srv.deadline("StartContainer"); got > 30*time.Second || got < 20*time.Second {
		t.Errorf("with a 30s caller deadline StartContainer arrived with %v left", got)
	}

	// A huge stop timeout does not overflow into a past deadline.
	if err := c.StopContainer(ctx, "c", 1<<62); err != nil {
		t.Fatalf("StopContainer with a huge timeout: %v", err)
	}
	if got := srv.deadline("StopContainer"); got != -1 && got < 24*time.Hour {
		t.Errorf("StopContainer with a huge timeout arrived with %v left", got)
	}
}

func TestDeadlineExceeded(t *testing.T) {
	srv := newTestServer()
	srv.setBlock("StartContainer")
	srv.setBlock("ListContainers")
	srv.setBlock("PullImage")
	path := serveCRI(t, srv)

	check := func(t *testing.T, name string, limit time.Duration, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		took := time.Since(start)
		if !errors.Is(err, remote.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: got %v, want ErrDeadlineExceeded", name, err)
		}
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: status code %v", name, status.Code(err))
		}
		if took > limit+5*time.Second {
			t.Errorf("%s took %v with a %v deadline", name, took, limit)
		}
	}

	c := newClient(t, remote.Config{Endpoint: path, CallTimeout: 50 * time.Millisecond, ListTimeout: time.Hour, PullTimeout: time.Hour})
	check(t, "StartContainer", 50*time.Millisecond, func() error { return c.StartContainer(t.Context(), "abc") })
	if err := c.StartContainer(t.Context(), "abc"); !strings.HasPrefix(err.Error(), `remote: StartContainer "abc": deadline exceeded`) {
		t.Errorf("error text %q", err)
	}

	c2 := newClient(t, remote.Config{Endpoint: path, CallTimeout: time.Hour, ListTimeout: 50 * time.Millisecond, PullTimeout: time.Hour})
	check(t, "ListContainers", 50*time.Millisecond, func() error { _, err := c2.ListContainers(t.Context(), nil); return err })

	c3 := newClient(t, remote.Config{Endpoint: path, CallTimeout: time.Hour, ListTimeout: time.Hour, PullTimeout: 50 * time.Millisecond})
	check(t, "PullImage", 50*time.Millisecond, func() error {
		_, err := c3.PullImage(t.Context(), &runtimeapi.ImageSpec{Image: "big"}, nil, nil)
		return err
	})

	// The caller's own shorter deadline.
	c4 := newClient(t, remote.Config{Endpoint: path, CallTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	check(t, "StartContainer with caller deadline", 50*time.Millisecond, func() error { return c4.StartContainer(ctx, "abc") })

	// A canceled caller ctx gives context.Canceled.
	cctx, ccancel := context.WithCancel(t.Context())
	ccancel()
	if err := c4.StartContainer(cctx, "abc"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: got %v, want context.Canceled", err)
	}
}

func TestErrorMapping(t *testing.T) {
	srv := newTestServer()
	c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
	tests := []struct {
		code     codes.Code
		sentinel error
		text     string
	}{
		{codes.NotFound, remote.ErrNotFound, `remote: StartContainer "abc": not found: no such container`},
		{codes.AlreadyExists, remote.ErrAlreadyExists, `remote: StartContainer "abc": already exists: no such container`},
		{codes.InvalidArgument, remote.ErrInvalidArgument, `remote: StartContainer "abc": invalid argument: no such container`},
		{codes.Unavailable, remote.ErrUnavailable, `remote: StartContainer "abc": unavailable: no such container`},
		{codes.Unimplemented, remote.ErrUnimplemented, `remote: StartContainer "abc": unimplemented: no such container`},
		{codes.FailedPrecondition, nil, `remote: StartContainer "abc": failed precondition: no such container`},
		{codes.Internal, nil, `remote: StartContainer "abc": internal: no such container`},
	}
	all := []error{remote.ErrNotFound, remote.ErrAlreadyExists, remote.ErrInvalidArgument, remote.ErrUnavailable,
		remote.ErrUnimplemented, remote.ErrDeadlineExceeded, remote.ErrClosed, remote.ErrResourceExhausted}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			srv.setErr("StartContainer", status.Error(tt.code, "no such container"))
			err := c.StartContainer(t.Context(), "abc")
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.text {
				t.Errorf("text %q, want %q", err, tt.text)
			}
			for _, s := range all {
				if got, want := errors.Is(err, s), s == tt.sentinel; got != want {
					t.Errorf("errors.Is(err, %v) = %v", s, got)
				}
			}
			wrapped := fmt.Errorf("sync pod: %w", err)
			if got := status.Code(wrapped); got != tt.code {
				t.Errorf("status.Code through wrapping = %v, want %v", got, tt.code)
			}
			var se *remote.StatusError
			if !errors.As(wrapped, &se) || se.Code != tt.code || se.Method != "StartContainer" || se.ID != "abc" || se.Message != "no such container" {
				t.Errorf("errors.As StatusError = %+v", se)
			}
			if got := remote.IsNotFound(wrapped); got != (tt.code == codes.NotFound) {
				t.Errorf("IsNotFound = %v", got)
			}
		})
	}

	// Methods without an ID leave it out of the text.
	srv.setErr("ListContainers", status.Error(codes.Unavailable, "shutting down"))
	if _, err := c.ListContainers(t.Context(), nil); err == nil || err.Error() != "remote: ListContainers: unavailable: shutting down" {
		t.Errorf("ListContainers error %v", err)
	}
}

func TestIsNotFound(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("not found"), false},
		{status.Error(codes.NotFound, "gone"), true},
		{fmt.Errorf("x: %w", status.Error(codes.NotFound, "gone")), true},
		{fmt.Errorf("x: %w", remote.ErrNotFound), true},
		{status.Error(codes.Unknown, "not found"), false},
	}
	for _, tc := range cases {
		if got := remote.IsNotFound(tc.err); got != tc.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestExecSyncExitCode(t *testing.T) {
	srv := newTestServer()
	c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
	stdout, stderr, err := c.ExecSync(t.Context(), "abc", []string{"fail", "now"}, 0)
	var exit *remote.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("got %v, want *ExitError", err)
	}
	if exit.ExitStatus() != 3 || exit.Code != 3 || !exit.Exited() || exit.ContainerID != "abc" {
		t.Errorf("ExitError %+v", exit)
	}
	if string(stdout) != "partial" || string(stderr) != "boom\n" || string(exit.Stderr) != "boom\n" {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	if want := `remote: ExecSync "abc": command [fail now] exited with code 3: boom`; err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
	var uexit utilexec.ExitError
	if !errors.As(err, &uexit) || uexit.ExitStatus() != 3 {
		t.Errorf("not a k8s.io/utils/exec.ExitError: %v", err)
	}
	if d := srv.detail("ExecSync"); d != "abc|fail now|0" {
		t.Errorf("server saw %q (timeout 0 must stay 0)", d)
	}
	if _, _, err := c.ExecSync(t.Context(), "abc", []string{"true"}, time.Second); err != nil {
		t.Errorf("exit 0: %v", err)
	}
}

func TestMessageSizeLimit(t *testing.T) {
	srv := newTestServer()
	big := strings.Repeat("x", 1<<20)
	for i := range 17 {
		srv.containers = append(srv.containers, &runtimeapi.Container{Id: fmt.Sprint(i), Labels: map[string]string{"big": big}})
	}
	path := serveCRI(t, srv)
	c := newClient(t, remote.Config{Endpoint: path})
	_, err := c.ListContainers(t.Context(), nil)
	if !errors.Is(err, remote.ErrResourceExhausted) {
		t.Fatalf("got %v, want ErrResourceExhausted", err)
	}
	if !strings.Contains(err.Error(), "remote: ListContainers: resource exhausted:") ||
		!strings.Contains(err.Error(), "larger than max") ||
		!strings.Contains(err.Error(), "MaxMsgSize is 16777216 bytes") {
		t.Errorf("unclear error: %v", err)
	}

	// 15 MiB is under the default limit.
	srv.mu.Lock()
	srv.containers = srv.containers[:15]
	srv.mu.Unlock()
	if got, err := c.ListContainers(t.Context(), nil); err != nil || len(got) != 15 {
		t.Errorf("15 MiB response: %d containers, %v", len(got), err)
	}

	// The limit applies to requests too.
	small := newClient(t, remote.Config{Endpoint: path, MaxMsgSize: 1024})
	_, err = small.CreateContainer(t.Context(), "sb", &runtimeapi.ContainerConfig{Labels: map[string]string{"big": strings.Repeat("y", 2048)}}, nil)
	if !errors.Is(err, remote.ErrResourceExhausted) || !strings.Contains(err.Error(), "MaxMsgSize is 1024 bytes") {
		t.Errorf("oversized request: %v", err)
	}
}

func TestConnect(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		c := newClient(t, remote.Config{Endpoint: serveCRI(t, newTestServer())})
		if err := c.Connect(t.Context()); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		if err := c.Connect(t.Context()); err != nil {
			t.Fatalf("second Connect: %v", err)
		}
	})
	t.Run("no v1 service", func(t *testing.T) {
		path, stop, err := serve(nil) // a gRPC server with no CRI v1 service
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		c := newClient(t, remote.Config{Endpoint: path})
		err = c.Connect(t.Context())
		if !errors.Is(err, remote.ErrUnsupportedAPI) || !errors.Is(err, remote.ErrUnimplemented) {
			t.Fatalf("got %v, want ErrUnsupportedAPI", err)
		}
		if !strings.Contains(err.Error(), "unix://"+path) {
			t.Errorf("error %q does not name the endpoint", err)
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.sock")
		c := newClient(t, remote.Config{Endpoint: path, ConnectTimeout: 5 * time.Second})
		err := c.Connect(t.Context())
		if !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), "unix://"+path) {
			t.Errorf("error %q does not name the endpoint", err)
		}
		if _, err := c.ListContainers(t.Context(), nil); !errors.Is(err, remote.ErrUnavailable) {
			t.Errorf("ListContainers: got %v, want ErrUnavailable", err)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		srv := newTestServer()
		srv.setBlock("Version")
		c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv), ConnectTimeout: 50 * time.Millisecond})
		err := c.Connect(t.Context())
		if !errors.Is(err, remote.ErrUnavailable) || !errors.Is(err, remote.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want ErrUnavailable and ErrDeadlineExceeded", err)
		}
	})
}

func TestNewValidates(t *testing.T) {
	long := "/" + strings.Repeat("a", 120)
	bad := map[string]string{
		"":                     "Endpoint is empty",
		"tcp://127.0.0.1:1234": `scheme "tcp"`,
		"npipe:////./pipe/cri": `scheme "npipe"`,
		"run/containerd.sock":  "not absolute",
		"unix://run/x.sock":    "not absolute",
		"unix://":              "not absolute",
		long:                   "longer than",
		"/run/a\x00b":          "NUL",
		"unix:/run/x.sock":     "not absolute",
	}
	for ep, want := range bad {
		_, err := remote.New(remote.Config{Endpoint: ep})
		if !errors.Is(err, remote.ErrInvalidEndpoint) {
			t.Errorf("New(%q): got %v, want ErrInvalidEndpoint", ep, err)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Endpoint") {
			t.Errorf("New(%q): error %q lacks %q", ep, err, want)
		}
	}
	for _, ep := range []string{"/run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock", "unix:///run/../run/x.sock"} {
		c, err := remote.New(remote.Config{Endpoint: ep})
		if err != nil {
			t.Errorf("New(%q): %v", ep, err)
			continue
		}
		if !strings.HasPrefix(c.Endpoint(), "unix:///run/") {
			t.Errorf("Endpoint() = %q", c.Endpoint())
		}
		_ = c.Close(t.Context())
	}
	fields := map[string]remote.Config{
		"ConnectTimeout": {Endpoint: "/x", ConnectTimeout: -1},
		"CallTimeout":    {Endpoint: "/x", CallTimeout: -1},
		"ListTimeout":    {Endpoint: "/x", ListTimeout: -1},
		"PullTimeout":    {Endpoint: "/x", PullTimeout: -1},
		"MaxMsgSize":     {Endpoint: "/x", MaxMsgSize: -1},
	}
	for field, cfg := range fields {
		_, err := remote.New(cfg)
		if !errors.Is(err, remote.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("negative %s: got %v", field, err)
		}
	}
}

func TestGetContainerEvents(t *testing.T) {
	t.Run("streams until ctx ends", func(t *testing.T) {
		srv := newTestServer()
		srv.events = []*runtimeapi.ContainerEventResponse{
			{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
			{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
			{ContainerId: "b", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		}
		c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
		ctx, cancel := context.WithCancel(t.Context())
		ch := make(chan *runtimeapi.ContainerEventResponse)
		established := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- c.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
		}()
		<-established
		var got []string
		for range srv.events {
			ev := <-ch
			got = append(got, ev.ContainerId+":"+ev.ContainerEventType.String())
		}
		want := "a:CONTAINER_CREATED_EVENT a:CONTAINER_STARTED_EVENT b:CONTAINER_STOPPED_EVENT"
		if strings.Join(got, " ") != want {
			t.Errorf("events %v, want %s", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("after cancel: %v, want nil", err)
		}
	})
	t.Run("ctx ends while the receiver is not reading", func(t *testing.T) {
		srv := newTestServer()
		srv.events = []*runtimeapi.ContainerEventResponse{{ContainerId: "a"}}
		c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse), nil) }()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("got %v, want nil", err)
		}
	})
	t.Run("stream fails", func(t *testing.T) {
		srv := newTestServer()
		srv.events = []*runtimeapi.ContainerEventResponse{{ContainerId: "a"}}
		srv.eventsErr = status.Error(codes.Internal, "event bus broke")
		c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
		ch := make(chan *runtimeapi.ContainerEventResponse, 1)
		err := c.GetContainerEvents(t.Context(), ch, nil)
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "remote: GetContainerEvents: internal: event bus broke") {
			t.Errorf("got %v", err)
		}
		if ev := <-ch; ev.ContainerId != "a" {
			t.Errorf("event %v", ev)
		}
	})
	t.Run("the runtime ends it for the caller's deadline", func(t *testing.T) {
		// The runtime's copy of the deadline (a relative timeout, rounded
		// down) can run out a moment before ctx does: that is the
		// caller's own deadline, a clean end. One far away is a failure.
		for _, tc := range []struct {
			timeout time.Duration
			clean   bool
		}{{500 * time.Millisecond, true}, {time.Hour, false}} {
			srv := newTestServer()
			srv.eventsErr = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
			c := newClient(t, remote.Config{Endpoint: serveCRI(t, srv)})
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			err := c.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse), nil)
			cancel()
			if clean := err == nil; clean != tc.clean {
				t.Errorf("deadline in %v: got %v, want a clean end %v", tc.timeout, err, tc.clean)
			}
		}
	})
	t.Run("unimplemented", func(t *testing.T) {
		// A runtime that registers the v1 service but lacks the method, as containerd 1.6.
		type bare struct {
			runtimeapi.UnimplementedRuntimeServiceServer
		}
		path, stop, err := serve(func(gs *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(gs, bare{}) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		c := newClient(t, remote.Config{Endpoint: path})
		err = c.GetContainerEvents(t.Context(), make(chan *runtimeapi.ContainerEventResponse), nil)
		if !errors.Is(err, remote.ErrUnimplemented) {
			t.Errorf("GetContainerEvents: got %v, want ErrUnimplemented", err)
		}
		if _, err := c.RuntimeConfig(t.Context()); !errors.Is(err, remote.ErrUnimplemented) {
			t.Errorf("RuntimeConfig: got %v, want ErrUnimplemented", err)
		}
	})
}

func TestClose(t *testing.T) {
	srv := newTestServer()
	srv.setBlock("StopPodSandbox")
	path := serveCRI(t, srv)

	t.Run("never used", func(t *testing.T) {
		c, err := remote.New(remote.Config{Endpoint: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := c.StartContainer(t.Context(), "a"); !errors.Is(err, remote.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	})
	t.Run("used, in flight, twice", func(t *testing.T) {
		c, err := remote.New(remote.Config{Endpoint: path})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Version(t.Context(), "v1"); err != nil {
			t.Fatal(err)
		}
		inflight := make(chan error, 1)
		go func() { inflight <- c.StopPodSandbox(t.Context(), "sb") }()
		<-srv.entered
		if err := c.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-inflight; !errors.Is(err, remote.ErrClosed) || err.Error() != `remote: StopPodSandbox "sb": client closed` {
			t.Errorf("in-flight call: %v", err)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := c.ListContainers(t.Context(), nil); !errors.Is(err, remote.ErrClosed) {
			t.Errorf("ListContainers after Close: %v", err)
		}
		if err := c.Connect(t.Context()); !errors.Is(err, remote.ErrClosed) {
			t.Errorf("Connect after Close: %v", err)
		}
		if err := c.GetContainerEvents(t.Context(), nil, nil); !errors.Is(err, remote.ErrClosed) {
			t.Errorf("GetContainerEvents after Close: %v", err)
		}
	})
}

func TestNilInputsDoNotPanic(t *testing.T) {
	c := newClient(t, remote.Config{Endpoint: serveCRI(t, newTestServer())})
	ctx := t.Context()
	_, _ = c.RunPodSandbox(ctx, nil, "")
	_, _ = c.CreateContainer(ctx, "", nil, nil)
	_, _ = c.PullImage(ctx, nil, nil, nil)
	_, _ = c.ImageStatus(ctx, nil, false)
	_ = c.RemoveImage(ctx, nil)
	_ = c.CheckpointContainer(ctx, nil)
	_, _ = c.Exec(ctx, nil)
	_, _ = c.Attach(ctx, nil)
	_, _ = c.PortForward(ctx, nil)
	_, _ = c.UpdatePodSandboxResources(ctx, nil)
	_ = c.UpdateContainerResources(ctx, "", nil)
	_, _, _ = c.ExecSync(ctx, "", nil, -time.Second)
	_ = c.StopContainer(ctx, "", -5)
}

func BenchmarkListContainers1000(b *testing.B) {
	srv := newTestServer()
	for i := range 1000 {
		srv.containers = append(srv.containers, &runtimeapi.Container{
			Id:           fmt.Sprintf("%064d", i),
			PodSandboxId: fmt.Sprintf("%064d", i/10),
			Metadata:     &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", i%10)},
			Image:        &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
			ImageRef:     "sha256:" + strings.Repeat("ab", 32),
			State:        runtimeapi.ContainerState_CONTAINER_RUNNING,
			CreatedAt:    int64(i),
			Labels: map[string]string{
				"io.kubernetes.pod.name":       fmt.Sprintf("pod-%d", i/10),
				"io.kubernetes.pod.namespace":  "default",
				"io.kubernetes.pod.uid":        fmt.Sprintf("uid-%d", i/10),
				"io.kubernetes.container.name": fmt.Sprintf("c%d", i%10),
			},
			Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
		})
	}
	path := serveCRI(b, srv)
	c, err := remote.New(remote.Config{Endpoint: path})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close(b.Context()) }()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.ListContainers(ctx, nil)
		if err != nil || len(got) != 1000 {
			b.Fatalf("%d containers, %v", len(got), err)
		}
	}
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := remote.New(remote.Config{Endpoint: "tcp://x", CallTimeout: -1, MaxMsgSize: -1})
	if !errors.Is(err, remote.ErrInvalidEndpoint) || !errors.Is(err, remote.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidEndpoint and ErrInvalidConfig", err)
	}
	for _, name := range []string{"Endpoint", "CallTimeout", "MaxMsgSize"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}
