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
	cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("c", "busybox", "sleep", "60")})
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
