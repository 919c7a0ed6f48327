package remote_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// testServer is a small CRI v1 server for the tests: it records what each
// method was asked (a short "detail" string), the deadline it arrived with,
// and answers with canned responses derived from the request. Methods can
// be made to block until their ctx ends or to fail with a given error.
type testServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	mu        sync.Mutex
	details   map[string]string
	remaining map[string]time.Duration
	block     map[string]bool
	errs      map[string]error
	entered   chan string

	containers []*runtimeapi.Container
	events     []*runtimeapi.ContainerEventResponse
	eventsErr  error
}

func newTestServer() *testServer {
	return &testServer{
		details:   map[string]string{},
		remaining: map[string]time.Duration{},
		block:     map[string]bool{},
		errs:      map[string]error{},
		entered:   make(chan string, 16),
	}
}

func (s *testServer) setBlock(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.block[method] = true
}

func (s *testServer) setErr(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[method] = err
}

func (s *testServer) detail(method string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.details[method]
}

func (s *testServer) deadline(method string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remaining[method]
}

// hook records the call and applies the configured block / error.
func (s *testServer) hook(ctx context.Context, method, detail string) error {
	s.mu.Lock()
	s.details[method] = detail
	if dl, ok := ctx.Deadline(); ok {
		s.remaining[method] = time.Until(dl)
	} else {
		s.remaining[method] = -1
	}
	block, err := s.block[method], s.errs[method]
	s.mu.Unlock()
	if block {
		select {
		case s.entered <- method:
		default:
		}
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

func (s *testServer) Version(ctx context.Context, r *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if err := s.hook(ctx, "Version", r.Version); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: r.Version, RuntimeName: "testcri", RuntimeVersion: "0.1.0", RuntimeApiVersion: "v1"}, nil
}

func (s *testServer) Status(ctx context.Context, r *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if err := s.hook(ctx, "Status", fmt.Sprint(r.Verbose)); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: false, Reason: "NetworkPluginNotReady"},
	}}}, nil
}

func (s *testServer) RuntimeConfig(ctx context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	if err := s.hook(ctx, "RuntimeConfig", ""); err != nil {
		return nil, err
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

func (s *testServer) UpdateRuntimeConfig(ctx context.Context, r *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, s.hook(ctx, "UpdateRuntimeConfig", r.GetRuntimeConfig().GetNetworkConfig().GetPodCidr())
}

func (s *testServer) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	name := r.GetConfig().GetMetadata().GetName()
	if err := s.hook(ctx, "RunPodSandbox", name+"|"+r.RuntimeHandler); err != nil {
		return nil, err
	}
	if name == "invalid" {
		return &runtimeapi.RunPodSandboxResponse{}, nil
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb-" + name}, nil
}

func (s *testServer) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, s.hook(ctx, "StopPodSandbox", r.PodSandboxId)
}

func (s *testServer) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, s.hook(ctx, "RemovePodSandbox", r.PodSandboxId)
}

func (s *testServer) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := s.hook(ctx, "PodSandboxStatus", fmt.Sprintf("%s|%v", r.PodSandboxId, r.Verbose)); err != nil {
		return nil, err
	}
	if r.PodSandboxId == "invalid" {
		return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{}}, nil
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id: r.PodSandboxId, Metadata: &runtimeapi.PodSandboxMetadata{Name: "web"}, State: runtimeapi.PodSandboxState_SANDBOX_READY,
	}}, nil
}

func (s *testServer) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	if err := s.hook(ctx, "ListPodSandbox", r.GetFilter().GetId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "sb-1"}, {Id: "sb-2"}}}, nil
}

func (s *testServer) PortForward(ctx context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := s.hook(ctx, "PortForward", fmt.Sprintf("%s|%v", r.PodSandboxId, r.Port)); err != nil {
		return nil, err
	}
	if r.PodSandboxId == "invalid" {
		return &runtimeapi.PortForwardResponse{}, nil
	}
	return &runtimeapi.PortForwardResponse{Url: "http://stream/pf/" + r.PodSandboxId}, nil
}

func (s *testServer) UpdatePodSandboxResources(ctx context.Context, r *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, s.hook(ctx, "UpdatePodSandboxResources", r.PodSandboxId)
}

func (s *testServer) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	name := r.GetConfig().GetMetadata().GetName()
	if err := s.hook(ctx, "CreateContainer", r.PodSandboxId+"|"+name+"|"+r.GetSandboxConfig().GetMetadata().GetName()); err != nil {
		return nil, err
	}
	if name == "invalid" {
		return &runtimeapi.CreateContainerResponse{}, nil
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: "ctr-" + name}, nil
}

func (s *testServer) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, s.hook(ctx, "StartContainer", r.ContainerId)
}

func (s *testServer) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, s.hook(ctx, "StopContainer", fmt.Sprintf("%s|%d", r.ContainerId, r.Timeout))
}

func (s *testServer) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, s.hook(ctx, "RemoveContainer", r.ContainerId)
}

func (s *testServer) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if err := s.hook(ctx, "ListContainers", r.GetFilter().GetPodSandboxId()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cs := s.containers
	s.mu.Unlock()
	if cs == nil {
		cs = []*runtimeapi.Container{{Id: "ctr-1", PodSandboxId: "sb-1"}}
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

func (s *testServer) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if err := s.hook(ctx, "ContainerStatus", fmt.Sprintf("%s|%v", r.ContainerId, r.Verbose)); err != nil {
		return nil, err
	}
	if r.ContainerId == "invalid" {
		return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "invalid"}}, nil
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: r.ContainerId, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
	}}, nil
}

func (s *testServer) UpdateContainerResources(ctx context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return &runtimeapi.UpdateContainerResourcesResponse{}, s.hook(ctx, "UpdateContainerResources", fmt.Sprintf("%s|%d", r.ContainerId, r.GetLinux().GetCpuShares()))
}

func (s *testServer) ReopenContainerLog(ctx context.Context, r *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	return &runtimeapi.ReopenContainerLogResponse{}, s.hook(ctx, "ReopenContainerLog", r.ContainerId)
}

func (s *testServer) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if err := s.hook(ctx, "ExecSync", fmt.Sprintf("%s|%s|%d", r.ContainerId, strings.Join(r.Cmd, " "), r.Timeout)); err != nil {
		return nil, err
	}
	if len(r.Cmd) > 0 && r.Cmd[0] == "fail" {
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("partial"), Stderr: []byte("boom\n"), ExitCode: 3}, nil
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("err")}, nil
}

func (s *testServer) Exec(ctx context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := s.hook(ctx, "Exec", r.ContainerId+"|"+strings.Join(r.Cmd, " ")); err != nil {
		return nil, err
	}
	if r.ContainerId == "invalid" {
		return &runtimeapi.ExecResponse{}, nil
	}
	return &runtimeapi.ExecResponse{Url: "http://stream/exec/" + r.ContainerId}, nil
}

func (s *testServer) Attach(ctx context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := s.hook(ctx, "Attach", r.ContainerId); err != nil {
		return nil, err
	}
	if r.ContainerId == "invalid" {
		return &runtimeapi.AttachResponse{}, nil
	}
	return &runtimeapi.AttachResponse{Url: "http://stream/attach/" + r.ContainerId}, nil
}

func (s *testServer) CheckpointContainer(ctx context.Context, r *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return &runtimeapi.CheckpointContainerResponse{}, s.hook(ctx, "CheckpointContainer", fmt.Sprintf("%s|%s|%d", r.ContainerId, r.Location, r.Timeout))
}

func (s *testServer) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	if err := s.hook(stream.Context(), "GetContainerEvents", ""); err != nil {
		return err
	}
	s.mu.Lock()
	events, evErr := s.events, s.eventsErr
	s.mu.Unlock()
	for _, ev := range events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if evErr != nil {
		return evErr
	}
	<-stream.Context().Done()
	return nil
}

func (s *testServer) ContainerStats(ctx context.Context, r *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	if err := s.hook(ctx, "ContainerStats", r.ContainerId); err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: r.ContainerId}}}, nil
}

func (s *testServer) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	if err := s.hook(ctx, "ListContainerStats", r.GetFilter().GetId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{{Attributes: &runtimeapi.ContainerAttributes{Id: "ctr-1"}}}}, nil
}

func (s *testServer) PodSandboxStats(ctx context.Context, r *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	if err := s.hook(ctx, "PodSandboxStats", r.PodSandboxId); err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: &runtimeapi.PodSandboxStats{Attributes: &runtimeapi.PodSandboxAttributes{Id: r.PodSandboxId}}}, nil
}

func (s *testServer) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if err := s.hook(ctx, "ListPodSandboxStats", r.GetFilter().GetId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{{Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-1"}}}}, nil
}

func (s *testServer) ListMetricDescriptors(ctx context.Context, _ *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	if err := s.hook(ctx, "ListMetricDescriptors", ""); err != nil {
		return nil, err
	}
	return &runtimeapi.ListMetricDescriptorsResponse{Descriptors: []*runtimeapi.MetricDescriptor{{Name: "container_cpu_usage_seconds_total"}}}, nil
}

func (s *testServer) ListPodSandboxMetrics(ctx context.Context, _ *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	if err := s.hook(ctx, "ListPodSandboxMetrics", ""); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: []*runtimeapi.PodSandboxMetrics{{PodSandboxId: "sb-1"}}}, nil
}

func (s *testServer) ListImages(ctx context.Context, r *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if err := s.hook(ctx, "ListImages", r.GetFilter().GetImage().GetImage()); err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{{Id: "sha256:1"}, {Id: "sha256:2"}}}, nil
}

func (s *testServer) ImageStatus(ctx context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := r.GetImage().GetImage()
	if err := s.hook(ctx, "ImageStatus", fmt.Sprintf("%s|%v", ref, r.Verbose)); err != nil {
		return nil, err
	}
	switch ref {
	case "missing":
		return &runtimeapi.ImageStatusResponse{}, nil
	case "invalid":
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{}}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:" + ref, Size: 1}}, nil
}

func (s *testServer) PullImage(ctx context.Context, r *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := r.GetImage().GetImage()
	if err := s.hook(ctx, "PullImage", ref+"|"+r.GetAuth().GetUsername()+"|"+r.GetSandboxConfig().GetMetadata().GetName()); err != nil {
		return nil, err
	}
	if ref == "invalid" {
		return &runtimeapi.PullImageResponse{}, nil
	}
	return &runtimeapi.PullImageResponse{ImageRef: "sha256:" + ref}, nil
}

func (s *testServer) RemoveImage(ctx context.Context, r *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return &runtimeapi.RemoveImageResponse{}, s.hook(ctx, "RemoveImage", r.GetImage().GetImage())
}

func (s *testServer) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := s.hook(ctx, "ImageFsInfo", ""); err != nil {
		return nil, err
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/images"}}}}, nil
}

// serve starts a gRPC server on a fresh unix socket with register applied
// and returns the socket's path and a stop function that waits for the
// server to finish.
func serve(register func(*grpc.Server)) (path string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "remote")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "cri.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	gs := grpc.NewServer()
	if register != nil {
		register(gs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	return path, func() {
		gs.Stop()
		<-done
		_ = os.RemoveAll(dir)
	}, nil
}

// serveCRI serves s as both CRI services for the duration of the test.
func serveCRI(tb testing.TB, s *testServer) string {
	tb.Helper()
	path, stop, err := serve(func(gs *grpc.Server) {
		runtimeapi.RegisterRuntimeServiceServer(gs, s)
		runtimeapi.RegisterImageServiceServer(gs, s)
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return path
}
