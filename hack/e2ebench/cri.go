package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// namespace is the pods' namespace, for nodekit's static pods and the
// floor's alike: the runtime's containers are counted by its label.
const (
	namespace    = "e2ebench"
	labelPodNS   = "io.kubernetes.pod.namespace"
	labelPodName = "io.kubernetes.pod.name"
	labelPodUID  = "io.kubernetes.pod.uid"
	labelCtrName = "io.kubernetes.container.name"
)

// cri is a CRI connection for the measurements (not the agent's).
type cri struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
	img  runtimeapi.ImageServiceClient
}

func dialCRI(ctx context.Context, endpoint string) (*cri, error) {
	if !strings.HasPrefix(endpoint, "unix://") {
		if !strings.HasPrefix(endpoint, "/") {
			return nil, fmt.Errorf("endpoint %q: want unix:///path or /path", endpoint)
		}
		endpoint = "unix://" + endpoint
	}
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, err
	}
	c := &cri{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn)}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.rt.Version(vctx, &runtimeapi.VersionRequest{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("CRI Version on %s: %w", endpoint, err)
	}
	return c, nil
}

func (c *cri) Close() error { return c.conn.Close() }

// checkImages fails when an image is not in the runtime (no registry is
// reachable here: import them with hack/containerd.sh).
func (c *cri) checkImages(ctx context.Context, images ...string) error {
	for _, im := range images {
		r, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: im}})
		if err != nil {
			return fmt.Errorf("ImageStatus %s: %w", im, err)
		}
		if r.GetImage() == nil {
			return fmt.Errorf("image %s is not in the runtime (hack/containerd.sh start imports it)", im)
		}
	}
	return nil
}

// runningContainers lists the running containers of our namespace.
func (c *cri) runningContainers(ctx context.Context) ([]*runtimeapi.Container, error) {
	r, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodNS: namespace},
	}})
	if err != nil {
		return nil, err
	}
	return r.Containers, nil
}

// readySandboxes counts the ready sandboxes of our namespace.
func (c *cri) readySandboxes(ctx context.Context) (int, error) {
	r, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodNS: namespace},
	}})
	if err != nil {
		return 0, err
	}
	return len(r.Items), nil
}

// waitRunning polls ListContainers every poll until n containers of our
// namespace are running; it returns when that was first seen.
func (c *cri) waitRunning(ctx context.Context, n int, poll, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	seen := 0
	for {
		cs, err := c.runningContainers(ctx)
		if err == nil {
			seen = len(cs)
			if seen >= n {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("after %s only %d of %d containers running (last error: %v)", timeout, seen, n, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// waitStopped polls until no container of our namespace runs and no
// sandbox of it is ready.
func (c *cri) waitStopped(ctx context.Context, poll, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		cs, err1 := c.runningContainers(ctx)
		sb, err2 := c.readySandboxes(ctx)
		if err1 == nil && err2 == nil && len(cs) == 0 && sb == 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("after %s still %d containers running and %d sandboxes ready (%v)",
				timeout, len(cs), sb, errors.Join(err1, err2))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// removeAll stops and removes every sandbox (and so every container) of
// our namespace, so each measurement starts on an empty runtime.
func (c *cri) removeAll(ctx context.Context) error {
	for range 5 {
		r, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{labelPodNS: namespace},
		}})
		if err != nil {
			return err
		}
		cs, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{labelPodNS: namespace},
		}})
		if err != nil {
			return err
		}
		if len(r.Items) == 0 && len(cs.Containers) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		errs := make([]error, len(r.Items)+len(cs.Containers))
		for i, s := range r.Items {
			wg.Go(func() {
				if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id})
			})
		}
		wg.Wait()
		// Containers whose sandbox is gone already.
		for i, ct := range cs.Containers {
			wg.Go(func() {
				_, _ = c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ct.Id, Timeout: 0})
				_, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ct.Id})
				errs[len(r.Items)+i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return errors.New("pods of namespace " + namespace + " left in the runtime after 5 rounds of removal")
}

// containerPID is the host PID of a running container's first process, from
// the verbose ContainerStatus (containerd: info["info"] is JSON with "pid").
func (c *cri) containerPID(ctx context.Context, id string) (int, error) {
	st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return 0, fmt.Errorf("ContainerStatus %s: %w", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		return 0, fmt.Errorf("container %s: no pid in the verbose status (%v)", id, err)
	}
	return info.Pid, nil
}
