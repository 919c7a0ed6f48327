package remote

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type (
	rtClient  = runtimeapi.RuntimeServiceClient
	imgClient = runtimeapi.ImageServiceClient
)

// Version returns the runtime's name and version and the CRI API version it
// serves. Deadline: ListTimeout.
func (c *Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return invoke(ctx, c, "Version", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.VersionResponse, error) {
			return rt.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
		})
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
// Deadline: ListTimeout.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := invoke(ctx, c, "Status", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.StatusResponse, error) {
			return rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
		})
	if err != nil {
		return nil, err
	}
	if resp.GetStatus() == nil {
		return nil, invalidResponse("Status", "", "no runtime status")
	}
	return resp, nil
}

// RuntimeConfig returns the runtime's configuration (cgroup driver).
// Runtimes that lack it (containerd 1.6) give ErrUnimplemented.
// Deadline: ListTimeout.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return invoke(ctx, c, "RuntimeConfig", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.RuntimeConfigResponse, error) {
			return rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
		})
}

// UpdateRuntimeConfig sends runtime configuration (the pod CIDR).
// Deadline: CallTimeout.
func (c *Client) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	_, err := invoke(ctx, c, "UpdateRuntimeConfig", "", c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
			return rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: runtimeConfig})
		})
	return err
}

// RunPodSandbox creates and starts a sandbox and returns its ID. Deadline:
// twice CallTimeout (the runtime may have to pull the sandbox image).
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	id := config.GetMetadata().GetName()
	if ns := config.GetMetadata().GetNamespace(); ns != "" {
		id = ns + "/" + id
	}
	resp, err := invoke(ctx, c, "RunPodSandbox", id, 2*c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.RunPodSandboxResponse, error) {
			return rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
		})
	if err != nil {
		return "", err
	}
	if resp.GetPodSandboxId() == "" {
		return "", invalidResponse("RunPodSandbox", id, "no sandbox ID")
	}
	return resp.GetPodSandboxId(), nil
}

// StopPodSandbox stops a sandbox and kills its containers. Deadline: CallTimeout.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := invoke(ctx, c, "StopPodSandbox", podSandboxID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.StopPodSandboxResponse, error) {
			return rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
		})
	return err
}

// RemovePodSandbox removes a sandbox and its containers. Deadline: CallTimeout.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := invoke(ctx, c, "RemovePodSandbox", podSandboxID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.RemovePodSandboxResponse, error) {
			return rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
		})
	return err
}

// PodSandboxStatus returns a sandbox's status. Deadline: ListTimeout.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := invoke(ctx, c, "PodSandboxStatus", podSandboxID, c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.PodSandboxStatusResponse, error) {
			return rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
		})
	if err != nil {
		return nil, err
	}
	if st := resp.GetStatus(); st != nil && (st.GetId() == "" || st.GetMetadata() == nil) {
		return nil, invalidResponse("PodSandboxStatus", podSandboxID, "status without ID or metadata")
	}
	return resp, nil
}

// ListPodSandbox lists the sandboxes that pass filter (nil: all).
// Deadline: ListTimeout.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := invoke(ctx, c, "ListPodSandbox", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListPodSandboxResponse, error) {
			return rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetItems(), nil
}

// PortForward asks for a streaming URL to forward ports of a sandbox.
// Deadline: CallTimeout.
func (c *Client) PortForward(ctx context.Context, request *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	id := request.GetPodSandboxId()
	resp, err := invoke(ctx, c, "PortForward", id, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.PortForwardResponse, error) {
			return rt.PortForward(ctx, request)
		})
	if err != nil {
		return nil, err
	}
	if resp.GetUrl() == "" {
		return nil, invalidResponse("PortForward", id, "no URL")
	}
	return resp, nil
}

// UpdatePodSandboxResources sends a sandbox's pod-level resources.
// Deadline: CallTimeout.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, request *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return invoke(ctx, c, "UpdatePodSandboxResources", request.GetPodSandboxId(), c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
			return rt.UpdatePodSandboxResources(ctx, request)
		})
}

// CreateContainer creates a container in a sandbox and returns its ID.
// Deadline: CallTimeout.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := invoke(ctx, c, "CreateContainer", podSandboxID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.CreateContainerResponse, error) {
			return rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
				PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig,
			})
		})
	if err != nil {
		return "", err
	}
	if resp.GetContainerId() == "" {
		return "", invalidResponse("CreateContainer", podSandboxID, "no container ID")
	}
	return resp.GetContainerId(), nil
}

// StartContainer starts a created container. Deadline: CallTimeout.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	_, err := invoke(ctx, c, "StartContainer", containerID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.StartContainerResponse, error) {
			return rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
		})
	return err
}

// StopContainer stops a container, giving it timeout seconds before it is
// killed. Deadline: CallTimeout plus timeout seconds.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	_, err := invoke(ctx, c, "StopContainer", containerID, plusSeconds(c.cfg.CallTimeout, timeout),
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.StopContainerResponse, error) {
			return rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
		})
	return err
}

// RemoveContainer removes a container. Deadline: CallTimeout.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	_, err := invoke(ctx, c, "RemoveContainer", containerID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.RemoveContainerResponse, error) {
			return rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
		})
	return err
}

// ListContainers lists the containers that pass filter (nil: all).
// Deadline: ListTimeout.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := invoke(ctx, c, "ListContainers", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListContainersResponse, error) {
			return rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetContainers(), nil
}

// ContainerStatus returns a container's status. Deadline: ListTimeout.
func (c *Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := invoke(ctx, c, "ContainerStatus", containerID, c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ContainerStatusResponse, error) {
			return rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
		})
	if err != nil {
		return nil, err
	}
	if st := resp.GetStatus(); st != nil && (st.GetId() == "" || st.GetMetadata() == nil) {
		return nil, invalidResponse("ContainerStatus", containerID, "status without ID or metadata")
	}
	return resp, nil
}

// UpdateContainerResources changes a running container's resources.
// Deadline: CallTimeout.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	_, err := invoke(ctx, c, "UpdateContainerResources", containerID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.UpdateContainerResourcesResponse, error) {
			return rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: containerID, Linux: resources.GetLinux(), Windows: resources.GetWindows(),
			})
		})
	return err
}

// ReopenContainerLog asks the runtime to reopen a container's log file.
// Deadline: CallTimeout.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	_, err := invoke(ctx, c, "ReopenContainerLog", containerID, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ReopenContainerLogResponse, error) {
			return rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
		})
	return err
}

// ExecSync runs cmd in a container and waits for it. timeout is passed to
// the runtime (rounded up to whole seconds; 0 means none) and the call's
// deadline is CallTimeout plus timeout.
//
// If the command ran and exited non-zero, ExecSync returns its stdout and
// stderr together with an *ExitError carrying the code (use errors.As).
// If the runtime failed the call, the error is a *StatusError as for every
// method; a command that outlives the deadline gives ErrDeadlineExceeded.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error) {
	secs := int64(0)
	if timeout > 0 {
		secs = int64((timeout + time.Second - 1) / time.Second)
	}
	resp, err := invoke(ctx, c, "ExecSync", containerID, plusSeconds(c.cfg.CallTimeout, secs),
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ExecSyncResponse, error) {
			return rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: secs})
		})
	if err != nil {
		return nil, nil, err
	}
	if code := resp.GetExitCode(); code != 0 {
		return resp.GetStdout(), resp.GetStderr(), &ExitError{
			ContainerID: containerID, Cmd: cmd, Code: code, Stderr: resp.GetStderr(),
		}
	}
	return resp.GetStdout(), resp.GetStderr(), nil
}

// Exec asks for a streaming URL to run a command in a container.
// Deadline: CallTimeout.
func (c *Client) Exec(ctx context.Context, request *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	id := request.GetContainerId()
	resp, err := invoke(ctx, c, "Exec", id, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ExecResponse, error) {
			return rt.Exec(ctx, request)
		})
	if err != nil {
		return nil, err
	}
	if resp.GetUrl() == "" {
		return nil, invalidResponse("Exec", id, "no URL")
	}
	return resp, nil
}

// Attach asks for a streaming URL to attach to a container.
// Deadline: CallTimeout.
func (c *Client) Attach(ctx context.Context, request *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	id := request.GetContainerId()
	resp, err := invoke(ctx, c, "Attach", id, c.cfg.CallTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.AttachResponse, error) {
			return rt.Attach(ctx, request)
		})
	if err != nil {
		return nil, err
	}
	if resp.GetUrl() == "" {
		return nil, invalidResponse("Attach", id, "no URL")
	}
	return resp, nil
}

// CheckpointContainer checkpoints a container. Deadline: CallTimeout plus
// the request's Timeout seconds.
func (c *Client) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	_, err := invoke(ctx, c, "CheckpointContainer", options.GetContainerId(), plusSeconds(c.cfg.CallTimeout, options.GetTimeout()),
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.CheckpointContainerResponse, error) {
			return rt.CheckpointContainer(ctx, options)
		})
	return err
}

// GetContainerEvents streams the runtime's container events into
// containerEventsCh until ctx ends (it then returns nil) or the stream fails
// (it returns the error). It has no deadline of its own. established, if not
// nil, is called once the stream is opened, before the first event is read.
// A runtime without the method (containerd 1.6) gives an error wrapping
// ErrUnimplemented, usually after established was called: gRPC reports it
// on the first read.
func (c *Client) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	const method = "GetContainerEvents"
	rt, _, err := c.stubs(method, "")
	if err != nil {
		return err
	}
	start := c.clock.Now()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := rt.GetContainerEvents(sctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.failed(method, "", start, err)
	}
	if established != nil {
		established(stream)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || c.endedByDeadline(ctx, err) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return &callError{msg: prefix(method, "") + ": the runtime ended the event stream", errs: []error{io.EOF}}
			}
			return c.failed(method, "", start, err)
		}
		select {
		case containerEventsCh <- ev:
		case <-ctx.Done():
			return nil
		}
	}
}

// endedByDeadline: err is the runtime ending a stream for ctx's own
// deadline a moment before ctx itself ends. The runtime gets the deadline
// as a relative timeout, rounded down, so its copy can run out a few
// microseconds first; that is the caller's deadline, not a failure.
func (c *Client) endedByDeadline(ctx context.Context, err error) bool {
	d, ok := ctx.Deadline()
	return ok && status.Code(err) == codes.DeadlineExceeded && !c.clock.Now().Before(d.Add(-time.Second))
}

// ContainerStats returns one container's stats. Deadline: ListTimeout.
func (c *Client) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	resp, err := invoke(ctx, c, "ContainerStats", containerID, c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ContainerStatsResponse, error) {
			return rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: containerID})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// ListContainerStats returns the stats of the containers that pass filter.
// Deadline: ListTimeout.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	resp, err := invoke(ctx, c, "ListContainerStats", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListContainerStatsResponse, error) {
			return rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// PodSandboxStats returns one sandbox's stats. Deadline: ListTimeout.
func (c *Client) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	resp, err := invoke(ctx, c, "PodSandboxStats", podSandboxID, c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.PodSandboxStatsResponse, error) {
			return rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// ListPodSandboxStats returns the stats of the sandboxes that pass filter.
// Deadline: ListTimeout.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	resp, err := invoke(ctx, c, "ListPodSandboxStats", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListPodSandboxStatsResponse, error) {
			return rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetStats(), nil
}

// ListMetricDescriptors returns the descriptors of the metrics that
// ListPodSandboxMetrics reports. Deadline: ListTimeout.
func (c *Client) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	resp, err := invoke(ctx, c, "ListMetricDescriptors", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListMetricDescriptorsResponse, error) {
			return rt.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetDescriptors(), nil
}

// ListPodSandboxMetrics returns the metrics of every sandbox.
// Deadline: ListTimeout.
func (c *Client) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	resp, err := invoke(ctx, c, "ListPodSandboxMetrics", "", c.cfg.ListTimeout,
		func(ctx context.Context, rt rtClient, _ imgClient) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
			return rt.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetPodMetrics(), nil
}
