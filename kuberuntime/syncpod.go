package kuberuntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SyncPod converges one pod: it computes the actions (ComputePodActions),
// kills the pod or the containers to kill, creates a sandbox when needed,
// then starts the next init container, the sidecars and the app containers.
// status is the pod's current runtime status (GetPodStatus; nil = nothing
// exists); pullSecrets are the pod's imagePullSecrets, already fetched.
// Every step is recorded in the result; failures never panic: an invalid pod
// gives one ActionSyncPod step wrapping ErrInvalidPod.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *kubetypes.PodStatus, pullSecrets []v1.Secret) kubetypes.SyncResult {
	var res kubetypes.SyncResult
	if err := validatePod(pod); err != nil {
		res.Add(kubetypes.StepResult{Action: kubetypes.ActionSyncPod, Target: podTarget(pod), Err: err, Message: err.Error()})
		return res
	}
	if status == nil {
		status = &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	actions := m.ComputePodActions(pod, status)
	log := m.log.With(zap.String("pod", podTarget(pod)), zap.String("uid", string(pod.UID)))
	if actions.KillPod || actions.CreateSandbox || len(actions.ContainersToKill) > 0 {
		log.Debug("pod actions", zap.Stringer("actions", actions))
	}

	if actions.KillPod {
		from := len(res.Steps)
		for _, s := range m.killPod(ctx, pod, status.RunningPod(), nil, status.IPs) {
			res.Add(s)
		}
		if res.FailedSince(from) {
			return res
		}
		if actions.CreateSandbox {
			m.purgeInitContainers(ctx, pod, status, &res)
		}
	} else {
		for _, k := range actions.ContainersToKill {
			cs := findStatusByID(status, k.ID)
			var recorded *int64
			if cs != nil {
				recorded = cs.GracePeriod
			}
			err := m.killContainer(ctx, pod, killOptions{
				ID: k.ID, Name: k.Name, Recorded: recorded, Reason: k.Reason, Message: k.Message, PodIPs: status.IPs,
			})
			res.Add(kubetypes.StepResult{Action: kubetypes.ActionKillContainer, Target: k.Name, Err: err, Message: k.Message})
			if err != nil {
				return res
			}
		}
	}

	m.pruneInitContainers(ctx, pod, status, &res)

	if !actions.CreateSandbox && len(actions.InitContainersToStart) == 0 && len(actions.ContainersToStart) == 0 {
		return res
	}

	podIPs := status.IPs
	sandboxID := actions.SandboxID
	var sandboxCfg *runtimeapi.PodSandboxConfig
	var images map[string]string
	if actions.CreateSandbox {
		if actions.SandboxID != "" {
			m.rec.Event(kubetypes.PodRef(pod), v1.EventTypeNormal, kubetypes.ReasonSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
		var blocked bool
		if blocked, images = m.neverPullBlocksStart(ctx, pod, actions, &res); blocked {
			return res
		}
		var err error
		sandboxCfg, err = m.builder.sandboxConfig(ctx, pod, actions.Attempt)
		if err != nil {
			res.Add(kubetypes.StepResult{Action: kubetypes.ActionCreateSandbox, Target: podTarget(pod), Err: err, Message: err.Error()})
			return res
		}
		handler, err := m.builder.runtimeHandler(ctx, pod)
		if err != nil {
			res.Add(kubetypes.StepResult{Action: kubetypes.ActionCreateSandbox, Target: podTarget(pod), Err: err, Message: err.Error()})
			return res
		}
		cctx, cancel := m.callCtx(ctx)
		sandboxID, err = m.cfg.Runtime.RunPodSandbox(cctx, sandboxCfg, handler)
		cancel()
		if err != nil {
			m.rec.Eventf(kubetypes.PodRef(pod), v1.EventTypeWarning, kubetypes.ReasonFailedCreatePodSandBox, "Failed to create pod sandbox: %v", err)
			err = fmt.Errorf("%w: %w", ErrCreateSandbox, err)
			res.Add(kubetypes.StepResult{Action: kubetypes.ActionCreateSandbox, Target: podTarget(pod), Err: err, Message: err.Error()})
			return res
		}
		// A pod on the pod network needs its new IPs (for the containers'
		// environment); a host-network pod's are the node's, so its
		// sandbox's status is left to the read after the sync.
		if !pod.Spec.HostNetwork {
			cctx, cancel = m.callCtx(ctx)
			resp, err := m.cfg.Runtime.PodSandboxStatus(cctx, sandboxID, false)
			cancel()
			if err == nil && resp.GetStatus() == nil {
				err = errors.New("empty sandbox status")
			}
			if err != nil {
				err = fmt.Errorf("%w: status of new sandbox %s: %w", ErrCreateSandbox, sandboxID, err)
				res.Add(kubetypes.StepResult{Action: kubetypes.ActionCreateSandbox, Target: sandboxID, Err: err, Message: err.Error()})
				return res
			}
			podIPs = nil
			if ip := resp.GetStatus().GetNetwork().GetIp(); ip != "" {
				podIPs = append(podIPs, ip)
				for _, extra := range resp.GetStatus().GetNetwork().GetAdditionalIps() {
					if extra.GetIp() != "" {
						podIPs = append(podIPs, extra.GetIp())
					}
				}
			}
		}
		res.Add(kubetypes.StepResult{Action: kubetypes.ActionCreateSandbox, Target: sandboxID, ID: sandboxID})
	} else {
		var err error
		sandboxCfg, err = m.builder.sandboxConfig(ctx, pod, actions.Attempt)
		if err != nil {
			res.Add(kubetypes.StepResult{Action: kubetypes.ActionSyncPod, Target: podTarget(pod), Err: err, Message: err.Error()})
			return res
		}
	}

	sc := startContext{pod: pod, status: status, secrets: pullSecrets, sandboxID: sandboxID, sandboxCfg: sandboxCfg, podIPs: podIPs, images: images}
	for _, i := range actions.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		typ := ContainerTypeInit
		if IsRestartableInitContainer(c) {
			typ = ContainerTypeSidecar
		}
		err := m.startContainer(ctx, &sc, c, typ, &res)
		if err != nil && typ == ContainerTypeInit {
			return res
		}
	}
	for _, i := range actions.ContainersToStart {
		_ = m.startContainer(ctx, &sc, &pod.Spec.Containers[i], ContainerTypeRegular, &res)
	}
	return res
}

type startContext struct {
	pod        *v1.Pod
	status     *kubetypes.PodStatus
	secrets    []v1.Secret
	sandboxID  string
	sandboxCfg *runtimeapi.PodSandboxConfig
	podIPs     []string
	// images are the references of images found present this round.
	images map[string]string
}

func findStatusByID(s *kubetypes.PodStatus, id string) *kubetypes.ContainerStatus {
	for _, cs := range s.ContainerStatuses {
		if cs.ID == id {
			return cs
		}
	}
	return nil
}

// startContainer runs one container: back-off check, image, config,
// create, start, postStart hook. The step and the waiting reason are
// recorded; the error is returned.
func (m *Manager) startContainer(ctx context.Context, sc *startContext, c *v1.Container, typ string, res *kubetypes.SyncResult) error {
	pod := sc.pod
	step := kubetypes.StepResult{Action: kubetypes.ActionStartContainer, Target: c.Name}
	fail := func(err error) error {
		step.Err = err
		step.Reason = reasonFor(err)
		step.Message = err.Error()
		res.Add(step)
		if step.Reason != "" {
			m.reasons.set(pod.UID, c.Name, step.Reason, step.Message)
		}
		return err
	}
	// failed is fail with the kubelet's Failed event ("Error: ...").
	failed := func(err error, id string) error {
		m.containerEvent(pod, c.Name, id, v1.EventTypeWarning, kubetypes.ReasonFailed, startErrorMessage(err))
		return fail(err)
	}

	// Crash-loop back-off, counted from when the last instance finished.
	var last *kubetypes.ContainerStatus
	for _, cs := range sc.status.ContainerStatuses {
		if cs.Name == c.Name && cs.State == kubetypes.ContainerStateExited {
			last = cs
			break
		}
	}
	if last != nil {
		key := backoffKey(&m.bufs, pod, c)
		if in, delay := m.crashBackoff.inBackOffSince(key, last.FinishedAt); in {
			m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonBackOff,
				fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, formatPod(pod)))
			return fail(&BackoffError{
				Err:   fmt.Errorf("%w: back-off %v restarting failed container=%s pod=%s", ErrCrashLoopBackOff, delay, c.Name, podTarget(pod)),
				Until: last.FinishedAt.Add(delay),
			})
		}
		if last.ExitUnconfirmed {
			if err := m.awaitExitConfirmed(ctx, last.ID); err != nil {
				return fail(err)
			}
		}
		m.crashBackoff.next(key, last.FinishedAt, "")
	}

	imageRef, err := m.ensureImage(ctx, pod, c, sc.secrets, sc.sandboxCfg, sc.images)
	if err != nil {
		return failed(err, "")
	}

	restarts := 0
	if cs := sc.status.FindContainerStatusByName(c.Name); cs != nil {
		restarts = cs.RestartCount + 1
	} else {
		// No instance known (the runtime lost its state, say after a
		// reboot): continue after the logs on disk rather than write
		// into 0.log again, as the kubelet does.
		restarts = m.restartCountFromLogs(pod, c.Name)
	}
	cfg, err := m.builder.containerConfig(ctx, containerInput{
		Pod: pod, Container: c, ContainerType: typ, RestartCount: restarts,
		PodIPs: sc.podIPs, ImageRef: imageRef, Hash: m.hash(c),
	})
	if err != nil {
		if !errors.Is(err, ErrCreateContainerConfig) {
			err = fmt.Errorf("%w: %w", ErrCreateContainerConfig, err)
		}
		return failed(err, "")
	}

	cctx, cancel := m.callCtx(ctx)
	id, err := m.cfg.Runtime.CreateContainer(cctx, sc.sandboxID, cfg, sc.sandboxCfg)
	cancel()
	if err != nil {
		return failed(fmt.Errorf("%w: %w", ErrCreateContainer, err), "")
	}
	step.ID = id
	m.containerEvent(pod, c.Name, id, v1.EventTypeNormal, kubetypes.ReasonCreated, "Container created")
	cctx, cancel = m.callCtx(ctx)
	err = m.cfg.Runtime.StartContainer(cctx, id)
	cancel()
	if err != nil {
		return failed(fmt.Errorf("%w: %w", ErrRunContainer, err), id)
	}
	m.containerEvent(pod, c.Name, id, v1.EventTypeNormal, kubetypes.ReasonStarted, "Container started")

	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if herr := m.runHook(ctx, pod, c, id, sc.podIPs, c.Lifecycle.PostStart, m.cfg.HookTimeout); herr != nil {
			// As the kubelet: the hook's output stays out of the event.
			m.containerEvent(pod, c.Name, id, v1.EventTypeWarning, kubetypes.ReasonFailedPostStartHook, "PostStartHook failed")
			kerr := m.killContainer(ctx, pod, killOptions{
				ID: id, Name: c.Name, Reason: KillReasonPostStartFailed, Message: "FailedPostStartHook", PodIPs: sc.podIPs,
			})
			err := fmt.Errorf("%w: %w", ErrPostStartHook, herr)
			if kerr != nil {
				err = errors.Join(err, kerr)
			}
			return fail(err)
		}
	}
	m.reasons.clear(pod.UID, c.Name)
	step.Message = id
	res.Add(step)
	return nil
}

// purgeInitContainers removes every instance of the init containers before
// a new sandbox starts initialization again.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, status *kubetypes.PodStatus, res *kubetypes.SyncResult) {
	if len(pod.Spec.InitContainers) == 0 {
		return
	}
	names := make(map[string]bool, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		names[pod.Spec.InitContainers[i].Name] = true
	}
	for _, cs := range status.ContainerStatuses {
		if names[cs.Name] {
			m.removeContainer(ctx, cs, res)
		}
	}
}

// pruneInitContainers keeps only the newest exited (or unknown) instance
// of each init container.
func (m *Manager) pruneInitContainers(ctx context.Context, pod *v1.Pod, status *kubetypes.PodStatus, res *kubetypes.SyncResult) {
	if len(pod.Spec.InitContainers) == 0 {
		return
	}
	for i := range pod.Spec.InitContainers {
		name := pod.Spec.InitContainers[i].Name
		seen := 0
		for _, cs := range status.ContainerStatuses {
			if cs.Name != name || (cs.State != kubetypes.ContainerStateExited && cs.State != kubetypes.ContainerStateUnknown) {
				continue
			}
			seen++
			if seen > 1 {
				m.removeContainer(ctx, cs, res)
			}
		}
	}
}

func (m *Manager) removeContainer(ctx context.Context, cs *kubetypes.ContainerStatus, res *kubetypes.SyncResult) {
	cctx, cancel := m.callCtx(ctx)
	err := m.cfg.Runtime.RemoveContainer(cctx, cs.ID)
	cancel()
	if isNotFound(err) {
		err = nil
	}
	if err == nil {
		m.removeContainerLog(cs.LogPath)
	}
	if err != nil {
		err = fmt.Errorf("%w: %s (%s): %w", ErrRemoveContainer, cs.Name, cs.ID, err)
		m.log.Info("remove container failed", zap.Error(err))
	}
	if res != nil {
		res.Add(kubetypes.StepResult{Action: kubetypes.ActionRemoveContainer, Target: cs.Name, Err: err, Message: cs.ID})
	}
}

// neverPullBlocksStart reports whether nothing of this round could start
// because every container to start has pull policy Never and its image is
// absent. Then no sandbox is made (a sandbox nothing can run in is only
// churn); each container gets its ErrImageNeverPull step and reason.
// present maps the images it found present to their references, for
// ensureImage to use in this round instead of asking again.
func (m *Manager) neverPullBlocksStart(ctx context.Context, pod *v1.Pod, actions PodActions, res *kubetypes.SyncResult) (blocked bool, present map[string]string) {
	var toStart []*v1.Container
	for _, i := range actions.InitContainersToStart {
		toStart = append(toStart, &pod.Spec.InitContainers[i])
	}
	if len(toStart) == 0 {
		for _, i := range actions.ContainersToStart {
			toStart = append(toStart, &pod.Spec.Containers[i])
		}
	}
	if len(toStart) == 0 {
		return false, nil
	}
	var errs []error
	for _, c := range toStart {
		if pullPolicy(c) != v1.PullNever {
			return false, present
		}
		image, _ := imageWithDefaultTag(c.Image)
		if present[image] != "" {
			continue
		}
		cctx, cancel := m.callCtx(ctx)
		resp, err := m.cfg.Images.ImageStatus(cctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}, false)
		cancel()
		if err != nil {
			return false, present // unknown: let the normal path decide
		}
		if img := resp.GetImage(); img != nil {
			if present == nil {
				present = make(map[string]string)
			}
			present[image] = cmp.Or(img.GetId(), image)
			continue // present
		}
		errs = append(errs, fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrImageNeverPull, image))
	}
	if len(errs) < len(toStart) {
		return false, present // some image is present: that container can start
	}
	for i, c := range toStart {
		image, _ := imageWithDefaultTag(c.Image)
		m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonErrImageNeverPull, fmt.Sprintf("Container image %q is not present with pull policy of Never", image))
		m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonFailed, startErrorMessage(errs[i]))
		step := kubetypes.StepResult{Action: kubetypes.ActionStartContainer, Target: c.Name, Err: errs[i], Reason: ReasonErrImageNeverPull, Message: errs[i].Error()}
		res.Add(step)
		m.reasons.set(pod.UID, c.Name, step.Reason, step.Message)
	}
	return true, nil
}

// exitConfirmRetry is how soon a pod worker tries again after
// awaitExitConfirmed gave up.
const exitConfirmRetry = time.Second

// awaitExitConfirmed waits, up to ExitConfirmTimeout, until the CRI no
// longer reports container id running (any other state, or the container
// gone). A previous instance whose exit came from the runtime's events may
// still be listed running for a moment; starting its replacement then
// would have the runtime list two running instances of one container.
// It returns a BackoffError wrapping ErrExitUnconfirmed when the CRI still
// shows it running at the deadline or cannot be asked, and ctx's error
// when ctx ends first.
func (m *Manager) awaitExitConfirmed(ctx context.Context, id string) error {
	clk := m.cfg.Clock
	deadline := clk.Now().Add(m.cfg.ExitConfirmTimeout)
	delay := 10 * time.Millisecond
	for {
		cctx, cancel := m.callCtx(ctx)
		resp, err := m.cfg.Runtime.ContainerStatus(cctx, id, false)
		cancel()
		switch {
		case isNotFound(err):
			return nil
		case err != nil:
			return &BackoffError{Err: fmt.Errorf("%w: container %s: status: %w", ErrExitUnconfirmed, id, err), Until: clk.Now().Add(exitConfirmRetry)}
		case resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING:
			return nil
		}
		now := clk.Now()
		if !now.Before(deadline) {
			return &BackoffError{
				Err:   fmt.Errorf("%w: container %s exited (runtime event) but is still running in the CRI after %v", ErrExitUnconfirmed, id, m.cfg.ExitConfirmTimeout),
				Until: now.Add(exitConfirmRetry),
			}
		}
		if left := deadline.Sub(now); delay > left {
			delay = left
		}
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
