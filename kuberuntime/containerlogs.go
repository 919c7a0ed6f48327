package kuberuntime

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerLogs writes the log of one container of pod to stdout and
// stderr, as the kubelet's /containerLogs does: the container's current
// instance, or with opts.Previous the one before it (for a container
// waiting to restart, both mean its last terminated instance, as in the
// pod's lastState). The options are those of PodLogOptions: tailLines
// (across rotated and compressed files, found by seeking from the end),
// limitBytes, sinceSeconds/sinceTime, timestamps, follow (until the
// instance stops running or ctx ends, across log rotations) and stream
// (Stdout or Stderr writes only that one; a nil writer skips its stream
// too). pod is the pod the agent runs (a static pod, not its mirror).
//
// Errors a server maps to HTTP statuses: ErrContainerNotFound (no such
// container in the spec: 404), ErrContainerNotStarted and
// ErrNoPreviousInstance (400, as the kubelet), and ErrInvalidLogOptions
// (400; it is logs.ErrInvalidOptions). A writer's error is returned as is;
// a follow ended by ctx returns ctx's error.
func (m *Manager) GetContainerLogs(ctx context.Context, pod *v1.Pod, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	if err := checkPodIdentity(pod); err != nil {
		return err
	}
	spec, kind := findContainerSpec(pod, containerName)
	if spec == nil {
		return fmt.Errorf("%w: container %q not found in pod %q", ErrContainerNotFound, containerName, podTarget(pod))
	}
	lopts, err := logs.OptionsFromPod(opts, m.cfg.Clock.Now())
	if err != nil {
		return err
	}
	if opts != nil && opts.Stream != nil {
		switch *opts.Stream {
		case v1.LogStreamStdout:
			stderr = nil
		case v1.LogStreamStderr:
			stdout = nil
		}
	}
	status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	var instances []*kubetypes.ContainerStatus // newest first
	for _, cs := range status.ContainerStatuses {
		if cs.Name == containerName {
			instances = append(instances, cs)
		}
	}
	cs, err := pickLogInstance(pod, spec, kind, instances, opts != nil && opts.Previous)
	if err != nil {
		return err
	}
	if cs.LogPath == "" || !filepath.IsAbs(cs.LogPath) {
		return fmt.Errorf("%w: container %q of pod %q has no log path (%q)", ErrContainerNotStarted, containerName, podTarget(pod), cs.LogPath)
	}
	id := cs.ID
	alive := func(ctx context.Context) (bool, error) {
		cctx, cancel := m.callCtx(ctx)
		defer cancel()
		resp, err := m.cfg.Runtime.ContainerStatus(cctx, id, false)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
	}
	if cs.State == kubetypes.ContainerStateExited {
		alive = nil // nothing more will be written
	}
	return m.logReader.ReadLogs(ctx, cs.LogPath, lopts, alive, stdout, stderr)
}

type containerKind int

const (
	regularContainer containerKind = iota
	initContainer
	ephemeralContainer
)

func findContainerSpec(pod *v1.Pod, name string) (*v1.Container, containerKind) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], regularContainer
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], initContainer
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c, ephemeralContainer
		}
	}
	return nil, regularContainer
}

// pickLogInstance chooses the instance whose log is read, the way the
// kubelet reads the pod's status: the current instance (running, or
// terminated for good), or for a container that exited and will be
// restarted its last terminated instance; previous means the last
// terminated instance before the current one.
func pickLogInstance(pod *v1.Pod, c *v1.Container, kind containerKind, instances []*kubetypes.ContainerStatus, previous bool) (*kubetypes.ContainerStatus, error) {
	if len(instances) == 0 {
		if previous {
			return nil, fmt.Errorf("%w: previous terminated container %q in pod %q not found", ErrNoPreviousInstance, c.Name, podTarget(pod))
		}
		return nil, fmt.Errorf("%w: container %q in pod %q is waiting to start", ErrContainerNotStarted, c.Name, podTarget(pod))
	}
	cur := instances[0]
	if !previous {
		return cur, nil
	}
	if cur.State == kubetypes.ContainerStateExited && willRestart(pod, c, kind, cur.ExitCode) {
		// Waiting to restart: its lastState is the newest instance.
		return cur, nil
	}
	if len(instances) < 2 {
		return nil, fmt.Errorf("%w: previous terminated container %q in pod %q not found", ErrNoPreviousInstance, c.Name, podTarget(pod))
	}
	return instances[1], nil
}

func willRestart(pod *v1.Pod, c *v1.Container, kind containerKind, exitCode int32) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	switch kind {
	case ephemeralContainer:
		return false
	case initContainer:
		if !IsRestartableInitContainer(c) {
			return exitCode != 0 && podRestartsOnFailure(pod)
		}
	}
	return restartAfterExit(c, pod, exitCode)
}
