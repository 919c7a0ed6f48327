package fake

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type container struct {
	id        string
	sb        *sandbox
	config    *runtimeapi.ContainerConfig // private copy of what the fake reads (containerConfig)
	meta      *runtimeapi.ContainerMetadata
	imageName string // what the behaviour tables match
	imageRef  string // image id
	logPath   string
	logFile   *os.File // opened by AppendLog

	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string

	behavior  Behavior
	resources *runtimeapi.LinuxContainerResources
	// limitSince is when the current memory limit was set (an OOM can't
	// happen before it).
	limitSince int64
	// killAt is when a pending StopContainer's timeout passes (0: none).
	killAt int64
}

// lookupContainerLocked finds a container by id or unique id prefix.
func (r *Runtime) lookupContainerLocked(id string) *container {
	if c, ok := r.containers[id]; ok {
		return c
	}
	if id == "" {
		return nil
	}
	var found *container
	for _, c := range r.containerOrder {
		if strings.HasPrefix(c.id, id) {
			if found != nil {
				return nil
			}
			found = c
		}
	}
	return found
}

// resolveBehaviorLocked layers: default, pause image, image table, command
// interpreter, sandbox annotation, container annotation (later wins).
func (r *Runtime) resolveBehavior(cfg *runtimeapi.ContainerConfig, sbAnnotations map[string]string, imageName string) (Behavior, error) {
	b := Behavior{MemoryBytes: r.defaultMemory, CPUMillicores: r.defaultCPU}
	if strings.Contains(imageName, "pause") {
		b.Sigterm = SigtermHandle
	}
	if p, ok := r.imageBehaviors[normalizeImage(imageName)]; ok {
		p.apply(&b)
	}
	if p, ok := interpret(cfg.Command, cfg.Args); ok {
		p.apply(&b)
	}
	key := BehaviorAnnotation(cfg.GetMetadata().GetName())
	for _, ann := range []map[string]string{sbAnnotations, cfg.Annotations} {
		if spec, ok := ann[key]; ok {
			p, err := parseBehavior(spec)
			if err != nil {
				return b, coded(codes.InvalidArgument, ErrInvalidArgument, "annotation %s: %v", key, err)
			}
			p.apply(&b)
		}
	}
	return b, nil
}

// CreateContainer creates a container in a ready sandbox. Its simulated
// process is chosen from the behaviour annotation, its command, and its image
// (see the package documentation).
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.begin(ctx, "CreateContainer", podSandboxID, config.GetMetadata().GetName(), 0); err != nil {
		return "", err
	}
	md := config.GetMetadata()
	if md == nil || md.Name == "" {
		return "", coded(codes.InvalidArgument, ErrInvalidArgument, "CreateContainer: container config must have metadata with a name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.lookupSandboxLocked(podSandboxID)
	if sb == nil {
		return "", notFound("sandbox", podSandboxID)
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", coded(codes.FailedPrecondition, ErrFailedPrecondition, "sandbox %q is not ready", sb.id)
	}
	for _, c := range sb.containers {
		if c.meta.Name == md.Name && c.meta.Attempt == md.Attempt {
			return "", coded(codes.AlreadyExists, ErrAlreadyExists, "container name %s attempt %d in sandbox %q is reserved for %q", md.Name, md.Attempt, sb.id, c.id)
		}
	}
	spec := config.GetImage()
	imageName := spec.GetUserSpecifiedImage()
	imageRef := imageID(normalizeImage(spec.GetImage()))
	if img := r.findImageLocked(spec.GetImage()); img != nil {
		imageRef = img.id
		if imageName == "" && len(img.tags) > 0 {
			imageName = img.tags[0]
		}
	} else if r.requireImages {
		return "", coded(codes.NotFound, ErrNotFound, "failed to get image %q: not found", spec.GetImage())
	}
	if imageName == "" {
		imageName = spec.GetImage()
	}
	sbAnn := sb.config.Annotations
	if sandboxConfig != nil && len(sandboxConfig.Annotations) > 0 {
		sbAnn = sandboxConfig.Annotations
	}
	b, err := r.resolveBehavior(config, sbAnn, imageName)
	if err != nil {
		return "", err
	}
	c := &container{
		id:        newID(),
		sb:        sb,
		config:    containerConfig(config),
		imageName: imageName,
		imageRef:  imageRef,
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: r.nowNano(),
		behavior:  b,
	}
	c.meta = c.config.Metadata
	c.resources = c.config.GetLinux().GetResources()
	if dir, p := sb.config.LogDirectory, c.config.LogPath; dir != "" && p != "" {
		c.logPath = filepath.Join(dir, p)
	}
	r.containers[c.id] = c
	r.containerOrder = append(r.containerOrder, c)
	sb.containers = append(sb.containers, c)
	r.publishLocked(c.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, c.createdAt, sb)
	return c.id, nil
}

// StartContainer starts a CREATED container in a ready sandbox.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	if err := r.begin(ctx, "StartContainer", containerID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is in %s state, not CREATED", c.id, c.state)
	}
	if c.sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "sandbox %q of container %q is not ready", c.sb.id, c.id)
	}
	now := r.nowNano()
	c.state, c.startedAt, c.limitSince = runtimeapi.ContainerState_CONTAINER_RUNNING, now, now
	r.publishLocked(c.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, now, c.sb)
	r.advanceLocked(c, now)
	return nil
}

// maxTimeout keeps timeout*time.Second from overflowing.
const maxTimeout = math.MaxInt64 / int64(time.Second) / 2

// StopContainer stops a running container. With timeout <= 0 it is killed
// at once (137). A process that handles SIGTERM exits at once with its
// TermExitCode. One that ignores SIGTERM is killed (137) when timeout
// seconds of the injected clock have passed: the call blocks until then (or
// until the process exits on its own, or ctx ends). Stopping a CREATED or
// EXITED container does nothing; an unknown id is NotFound.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	if err := r.begin(ctx, "StopContainer", containerID, "", timeout); err != nil {
		return err
	}
	timeout = min(timeout, maxTimeout)
	r.mu.Lock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		r.mu.Unlock()
		return notFound("container", containerID)
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil
	}
	switch {
	case timeout <= 0:
		r.finishLocked(c, now, 137, "Error", "")
		r.mu.Unlock()
		return nil
	case c.behavior.Sigterm == SigtermHandle:
		r.finishLocked(c, now, c.behavior.TermExitCode, "", "")
		r.mu.Unlock()
		return nil
	}
	deadline := now + timeout*int64(time.Second)
	if c.killAt == 0 || deadline < c.killAt {
		c.killAt = deadline
	}
	r.wakeSubscribersLocked()
	for {
		at, _, _, _ := c.nextExit()
		r.mu.Unlock()
		if err := r.waitUntil(ctx, at, nil); err != nil {
			return err
		}
		r.mu.Lock()
		if r.containers[c.id] != c {
			r.mu.Unlock()
			return nil // removed meanwhile
		}
		r.advanceLocked(c, r.nowNano())
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.mu.Unlock()
			return nil
		}
	}
}

// RemoveContainer removes a container. A running one is killed first, as
// CRI says and containerd does (Config.RemoveRunningFails makes it an
// error instead). Removing an unknown container is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	if err := r.begin(ctx, "RemoveContainer", containerID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return nil
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		if r.removeRunningFails {
			return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is running, stop it first", c.id)
		}
		r.finishLocked(c, now, 137, "Error", "")
	}
	r.removeContainerLocked(c, now)
	return nil
}

func (r *Runtime) removeContainerLocked(c *container, now int64) {
	c.closeLogLocked()
	delete(r.containers, c.id)
	r.containerOrder = deleteElem(r.containerOrder, c)
	c.sb.containers = deleteElem(c.sb.containers, c)
	r.publishLocked(c.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, now, c.sb)
}

// ContainerStatus returns the container's status.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := r.begin(ctx, "ContainerStatus", containerID, "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return nil, notFound("container", containerID)
	}
	r.advanceLocked(c, r.nowNano())
	resp := &runtimeapi.ContainerStatusResponse{Status: r.containerStatusLocked(c)}
	if verbose {
		resp.Info = map[string]string{"behavior": c.behavior.String(), "sandboxID": c.sb.id}
	}
	return resp, nil
}

func (r *Runtime) containerStatusLocked(c *container) *runtimeapi.ContainerStatus {
	spec := &runtimeapi.ImageSpec{Image: c.config.GetImage().GetImage(), UserSpecifiedImage: c.config.GetImage().GetUserSpecifiedImage()}
	// As containerd's status: the image's first repo tag while the image
	// has one (the kubelet creates containers by image ID and reports this
	// as the pod's containerStatuses[].image).
	if img := r.images[c.imageRef]; img != nil && len(img.tags) > 0 {
		spec.Image = img.tags[0]
	}
	st := &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.meta.Name, Attempt: c.meta.Attempt},
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       spec,
		ImageRef:    c.imageRef,
		ImageId:     c.imageRef,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      maps.Clone(c.config.Labels),
		Annotations: maps.Clone(c.config.Annotations),
		LogPath:     c.logPath,
	}
	for _, m := range c.config.Mounts {
		st.Mounts = append(st.Mounts, cloneMount(m))
	}
	if c.resources != nil {
		st.Resources = &runtimeapi.ContainerResources{Linux: cloneResources(c.resources)}
	}
	return st
}

func (r *Runtime) containerStatusesLocked(sb *sandbox) []*runtimeapi.ContainerStatus {
	out := make([]*runtimeapi.ContainerStatus, 0, len(sb.containers))
	for _, c := range sb.containers {
		out = append(out, r.containerStatusLocked(c))
	}
	return out
}

// ListContainers lists containers, oldest first, filtered by id (or unique
// id prefix), state, sandbox id and label selector.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := r.begin(ctx, "ListContainers", filter.GetId(), "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cands, ok := r.containerCandidatesLocked(filter.GetId(), filter.GetPodSandboxId())
	if !ok {
		return []*runtimeapi.Container{}, nil
	}
	now := r.nowNano()
	out := make([]*runtimeapi.Container, 0, len(cands))
	for _, c := range cands {
		r.advanceLocked(c, now)
		if st := filter.GetState(); st != nil && st.State != c.state {
			continue
		}
		if !labelsMatch(c.config.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sb.id,
			Metadata:     &runtimeapi.ContainerMetadata{Name: c.meta.Name, Attempt: c.meta.Attempt},
			Image:        &runtimeapi.ImageSpec{Image: c.config.GetImage().GetImage(), UserSpecifiedImage: c.config.GetImage().GetUserSpecifiedImage()},
			ImageRef:     c.imageRef,
			ImageId:      c.imageRef,
			State:        c.state,
			CreatedAt:    c.createdAt,
			Labels:       maps.Clone(c.config.Labels),
			Annotations:  maps.Clone(c.config.Annotations),
		})
	}
	return out, nil
}

// containerCandidatesLocked narrows by id and sandbox id; ok is false when
// nothing can match.
func (r *Runtime) containerCandidatesLocked(id, sandboxID string) ([]*container, bool) {
	cands := r.containerOrder
	var sb *sandbox
	if sandboxID != "" {
		if sb = r.lookupSandboxLocked(sandboxID); sb == nil {
			return nil, false
		}
		cands = sb.containers
	}
	if id != "" {
		c := r.lookupContainerLocked(id)
		if c == nil || (sb != nil && c.sb != sb) {
			return nil, false
		}
		cands = []*container{c}
	}
	return cands, true
}

// UpdateContainerResources replaces the container's Linux resources; a new
// memory limit below the current working set OOM-kills it.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	if err := r.begin(ctx, "UpdateContainerResources", containerID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	if l := resources.GetLinux(); l != nil {
		c.resources = cloneResources(l)
		c.limitSince = now
		r.advanceLocked(c, now)
		r.wakeSubscribersLocked()
	}
	return nil
}

// ReopenContainerLog succeeds for a running container; when AppendLog
// has opened its log file, that file is closed and a new one created at
// the log path.
func (r *Runtime) ReopenContainerLog(ctx context.Context, containerID string) error {
	if err := r.begin(ctx, "ReopenContainerLog", containerID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	r.advanceLocked(c, r.nowNano())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	return c.reopenLogLocked()
}

// SetExecHandler replaces the ExecSync script (nil restores the default).
func (r *Runtime) SetExecHandler(h ExecHandler) {
	r.mu.Lock()
	r.execHandler = h
	r.mu.Unlock()
}

func defaultExec(_ string, cmd []string) (stdout, stderr []byte, exitCode int32, err error) {
	if len(cmd) > 0 && filepath.Base(cmd[0]) == "false" {
		return nil, nil, 1, nil
	}
	return nil, nil, 0, nil
}

// ExecSync runs cmd in a running container through the exec handler. A
// non-zero exit code is returned as *ExitError together with the output.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error) {
	if err := r.begin(ctx, "ExecSync", containerID, strings.Join(cmd, " "), int64(timeout)); err != nil {
		return nil, nil, err
	}
	if len(cmd) == 0 {
		return nil, nil, coded(codes.InvalidArgument, ErrInvalidArgument, "ExecSync: empty command")
	}
	r.mu.Lock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		r.mu.Unlock()
		return nil, nil, notFound("container", containerID)
	}
	r.advanceLocked(c, r.nowNano())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil, nil, coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	h, id := r.execHandler, c.id
	r.mu.Unlock()
	if h == nil {
		h = defaultExec
	}
	stdout, stderr, code, err := h(id, slices.Clone(cmd))
	if err != nil {
		return stdout, stderr, err
	}
	if code != 0 {
		return stdout, stderr, &ExitError{Code: code}
	}
	return stdout, stderr, nil
}

// ExitContainer makes a running container's process exit now with code
// (reason "Completed" for 0, "Error" otherwise, unless reason is given),
// as if it crashed or finished. It is a test hook, not a CRI call.
func (r *Runtime) ExitContainer(containerID string, code int32, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return notFound("container", containerID)
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	r.finishLocked(c, now, code, reason, "")
	return nil
}

// Behavior returns the resolved behaviour of a container's simulated process.
func (r *Runtime) Behavior(containerID string) (Behavior, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		return Behavior{}, notFound("container", containerID)
	}
	return c.behavior, nil
}
