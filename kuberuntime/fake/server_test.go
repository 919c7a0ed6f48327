package fake

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func serveFake(t *testing.T, r *Runtime) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient, func()) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize)))
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn), stop
}

func TestServeRoundTrip(t *testing.T) {
	r, fc := newFake(t, Config{Images: []string{"busybox"}})
	rt, img, stop := serveFake(t, r)
	defer stop()
	ctx := t.Context()

	v, err := rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil || v.RuntimeApiVersion != "v1" || v.RuntimeName != "fake" {
		t.Fatalf("Version %v %v", v, err)
	}
	events, err := rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, r, 1)
	sbResp, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("p", false, nil)})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbResp.PodSandboxId
	if ev, err := events.Recv(); err != nil || ev.ContainerId != sb || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT {
		t.Fatalf("first event %v %v", ev, err)
	}
	st, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil || st.Status.Network.Ip != "10.88.0.2" {
		t.Fatalf("PodSandboxStatus %v %v", st, err)
	}
	pull, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	if err != nil || !strings.HasPrefix(pull.ImageRef, "sha256:") {
		t.Fatalf("PullImage %v %v", pull, err)
	}
	is, err := img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "absent"}})
	if err != nil || is.Image != nil {
		t.Fatalf("ImageStatus of absent %v %v", is, err)
	}
	cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("c", "busybox", "sh", "-c", "trap '' TERM; sleep 60")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	list, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb}})
	if err != nil || len(list.Containers) != 1 || list.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers %v %v", list, err)
	}
	// ExecSync: the exit code is in the response, not an RPC error.
	r.SetExecHandler(func(string, []string) ([]byte, []byte, int32, error) { return []byte("no"), nil, 2, nil })
	ex, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cr.ContainerId, Cmd: []string{"check"}, Timeout: 1})
	if err != nil || ex.ExitCode != 2 || string(ex.Stdout) != "no" {
		t.Fatalf("ExecSync %v %v", ex, err)
	}
	// Codes survive the wire.
	_, err = rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
	if grpcstatus.Code(err) != codes.NotFound {
		t.Fatalf("ContainerStatus(nope): %v", err)
	}
	_, err = rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cr.ContainerId})
	if grpcstatus.Code(err) != codes.Unimplemented {
		t.Fatalf("Exec: %v", err)
	}
	// A blocking StopContainer over the wire, driven by the fake clock.
	done := make(chan error, 1)
	go func() {
		_, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cr.ContainerId, Timeout: 30})
		done <- err
	}()
	waitWaiters(t, fc, 2) // the stop's timer and the event stream's
	fc.Step(30 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cs, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cr.ContainerId})
	if err != nil || cs.Status.ExitCode != 137 {
		t.Fatalf("after stop %v %v", cs, err)
	}
	stats, err := rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(stats.Stats) != 1 {
		t.Fatalf("ListPodSandboxStats %v %v", stats, err)
	}
	fs, err := img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fs.ImageFilesystems) != 1 {
		t.Fatalf("ImageFsInfo %v %v", fs, err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
}

func TestServeStopsWithBlockedCalls(t *testing.T) {
	r, fc := newFake(t, Config{})
	rt, _, stop := serveFake(t, r)
	ctx := t.Context()
	r.InjectDelay("Status", time.Hour)
	done := make(chan error, 1)
	go func() { _, err := rt.Status(ctx, &runtimeapi.StatusRequest{}); done <- err }()
	events, err := rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitWaiters(t, fc, 1)
	stop() // returns only after the blocked call and the stream ended
	if err := <-done; err == nil {
		t.Fatal("blocked call succeeded")
	}
	if _, err := events.Recv(); err == nil {
		t.Fatal("event stream still open")
	}
}

func TestServeEventsUnimplemented(t *testing.T) {
	r, _ := newFake(t, Config{EventsUnimplemented: true})
	rt, _, stop := serveFake(t, r)
	defer stop()
	events, err := rt.GetContainerEvents(t.Context(), &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = events.Recv()
	}
	if grpcstatus.Code(err) != codes.Unimplemented {
		t.Fatalf("GetContainerEvents: %v", err)
	}
}

// TestServeEveryRPC calls each RPC over the wire once and checks its code.
func TestServeEveryRPC(t *testing.T) {
	r, _ := newFake(t, Config{Images: []string{"busybox"}})
	rt, img, stop := serveFake(t, r)
	defer stop()
	ctx := t.Context()
	sbResp, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("p", true, nil)})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbResp.PodSandboxId
	cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("c", "busybox")})
	if err != nil {
		t.Fatal(err)
	}
	c := cr.ContainerId
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"Status", func() error {
			st, err := rt.Status(ctx, &runtimeapi.StatusRequest{})
			if err == nil && len(st.Status.Conditions) != 2 {
				t.Error("Status conditions")
			}
			return err
		}, codes.OK},
		{"ListPodSandbox", func() error {
			l, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			if err == nil && len(l.Items) != 1 {
				t.Error("ListPodSandbox items")
			}
			return err
		}, codes.OK},
		{"UpdateContainerResources", func() error {
			_, err := rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: c, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2}})
			return err
		}, codes.OK},
		{"ReopenContainerLog", func() error {
			_, err := rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: c})
			return err
		}, codes.OK},
		{"ContainerStats", func() error {
			s, err := rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: c})
			if err == nil && s.Stats.Attributes.Id != c {
				t.Error("ContainerStats id")
			}
			return err
		}, codes.OK},
		{"ListContainerStats", func() error {
			s, err := rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
			if err == nil && len(s.Stats) != 1 {
				t.Error("ListContainerStats")
			}
			return err
		}, codes.OK},
		{"PodSandboxStats", func() error {
			_, err := rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
			return err
		}, codes.OK},
		{"UpdateRuntimeConfig", func() error {
			_, err := rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{})
			return err
		}, codes.OK},
		{"RuntimeConfig", func() error {
			_, err := rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
			return err
		}, codes.OK},
		{"UpdatePodSandboxResources", func() error {
			_, err := rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: sb})
			return err
		}, codes.OK},
		{"ListImages", func() error {
			l, err := img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
			if err == nil && len(l.Images) != 1 {
				t.Error("ListImages")
			}
			return err
		}, codes.OK},
		{"RemoveImage", func() error {
			_, err := img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
			return err
		}, codes.OK},
		{"Attach", func() error { _, err := rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: c}); return err }, codes.Unimplemented},
		{"PortForward", func() error {
			_, err := rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb})
			return err
		}, codes.Unimplemented},
		{"CheckpointContainer", func() error {
			_, err := rt.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: c})
			return err
		}, codes.Unimplemented},
		{"ListMetricDescriptors", func() error {
			_, err := rt.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
			return err
		}, codes.Unimplemented},
		{"ListPodSandboxMetrics", func() error {
			_, err := rt.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
			return err
		}, codes.Unimplemented},
		{"StopContainer", func() error {
			_, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c})
			return err
		}, codes.OK},
		{"RemoveContainer", func() error {
			_, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
			return err
		}, codes.OK},
		{"StopPodSandbox", func() error {
			_, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
			return err
		}, codes.OK},
		{"StopPodSandbox unknown", func() error {
			_, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "nope"})
			return err
		}, codes.NotFound},
		{"CreateContainer in stopped sandbox", func() error {
			_, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("d", "busybox")})
			return err
		}, codes.FailedPrecondition},
	}
	for _, tc := range calls {
		if err := tc.call(); grpcstatus.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if n := r.CountCalls("UpdateContainerResources"); n != 1 {
		t.Errorf("UpdateContainerResources recorded %d times", n)
	}
}
