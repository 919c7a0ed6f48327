package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// KillPod stops a pod: its containers in parallel (regular containers
// first; each sidecar only after the regular containers and the sidecars
// started after it have stopped, as the kubelet orders termination), each
// after its preStop hook and with the rest of its grace period, then every
// sandbox. pod may be nil for an orphan (only the runtime view is known);
// then no hooks run and the grace recorded on each container is used.
// running nil means nothing to stop. The grace period is, in order:
// gracePeriodOverride, pod.DeletionGracePeriodSeconds, the pod's
// terminationGracePeriodSeconds, the grace recorded on the container,
// Config.DefaultGracePeriod; at least MinimumGracePeriodSeconds remain for
// the stop after a hook. Containers and sandboxes that are already gone are
// fine. Errors of all steps are joined.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, running *kubetypes.Pod, gracePeriodOverride *int64) error {
	var errs []error
	for _, s := range m.killPod(ctx, pod, running, gracePeriodOverride, nil) {
		if s.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", s.Action, s.Target, s.Err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) killPod(ctx context.Context, pod *v1.Pod, running *kubetypes.Pod, override *int64, podIPs []string) []kubetypes.StepResult {
	if running == nil {
		return nil
	}
	var victims []*kubetypes.Container
	for _, c := range running.Containers {
		if c != nil && c.State != kubetypes.ContainerStateExited {
			victims = append(victims, c)
		}
	}
	steps := make([]kubetypes.StepResult, len(victims), len(victims)+len(running.Sandboxes))
	ord := newTerminationOrdering(m.cfg.Clock, pod, victims)
	var wg sync.WaitGroup
	for i, c := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.killContainer(ctx, pod, killOptions{
				ID: c.ID, Name: c.Name, Recorded: c.GracePeriod, Override: override,
				Reason: KillReasonUnknownState, PodIPs: podIPs, Ordering: ord,
			})
			steps[i] = kubetypes.StepResult{Action: kubetypes.ActionKillContainer, Target: c.Name, Err: err}
		}()
	}
	wg.Wait()
	for _, sb := range running.Sandboxes {
		if sb == nil {
			continue
		}
		cctx, cancel := m.callCtx(ctx)
		err := m.cfg.Runtime.StopPodSandbox(cctx, sb.ID)
		cancel()
		if isNotFound(err) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrKillSandbox, err)
		}
		steps = append(steps, kubetypes.StepResult{Action: kubetypes.ActionStopSandbox, Target: sb.ID, Err: err})
	}
	return steps
}

// containerSpec finds a container of the pod by name (init or regular).
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// gracePeriod is the grace a container is stopped with, before hooks.
func (m *Manager) gracePeriod(pod *v1.Pod, spec *v1.Container, recorded, override *int64, reason KillReason) int64 {
	switch {
	case override != nil:
		return *override
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		if spec != nil {
			if reason == KillReasonLivenessProbe && spec.LivenessProbe != nil && spec.LivenessProbe.TerminationGracePeriodSeconds != nil {
				return *spec.LivenessProbe.TerminationGracePeriodSeconds
			}
			if reason == KillReasonStartupProbe && spec.StartupProbe != nil && spec.StartupProbe.TerminationGracePeriodSeconds != nil {
				return *spec.StartupProbe.TerminationGracePeriodSeconds
			}
		}
		return *pod.Spec.TerminationGracePeriodSeconds
	case recorded != nil:
		return *recorded
	}
	return m.cfg.DefaultGracePeriod
}

// killOptions says which container killContainer stops, and how.
type killOptions struct {
	// ID and Name identify the container (Name finds its spec in the pod).
	ID, Name string
	// Recorded is the grace period recorded on the container, if any;
	// Override one the caller imposes (see gracePeriod for the order).
	Recorded, Override *int64
	// Reason picks a probe's grace period; Message, if set, is logged.
	Reason  KillReason
	Message string
	// PodIPs are passed to the preStop hook.
	PodIPs []string
	// Ordering, if not nil, makes the stop wait for its turn.
	Ordering *terminationOrdering
}

// killContainer stops one container: preStop hook (bounded by the grace
// period, its time deducted), then its turn in the termination order, then
// StopContainer with what is left (at least MinimumGracePeriodSeconds).
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, o killOptions) error {
	id, name, ord := o.ID, o.Name, o.Ordering
	defer ord.terminated(name)
	spec := containerSpec(pod, name)
	grace := m.gracePeriod(pod, spec, o.Recorded, o.Override, o.Reason)
	log := m.log.With(zap.String("pod", podTarget(pod)), zap.String("container", name), zap.String("id", id))
	if o.Message != "" {
		log.Info("killing container", zap.String("reason", string(o.Reason)), zap.String("message", o.Message))
	}
	if pod != nil {
		msg := o.Message
		if msg == "" {
			msg = "Stopping container " + name
		}
		m.containerEvent(pod, name, id, v1.EventTypeNormal, kubetypes.ReasonKilling, msg)
	}
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		grace -= m.runPreStop(ctx, pod, spec, id, o.PodIPs, grace)
	}
	if grace > 0 {
		grace -= ord.waitForTurn(name, grace)
	}
	if grace < MinimumGracePeriodSeconds {
		grace = MinimumGracePeriodSeconds
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+m.cfg.CallTimeout)
	err := m.cfg.Runtime.StopContainer(sctx, id, grace)
	cancel()
	if err != nil && !isNotFound(err) {
		log.Warn("stop container failed", zap.Int64("grace", grace), zap.Error(err))
		return fmt.Errorf("%w: %s (%s): %w", ErrKillContainer, name, id, err)
	}
	return nil
}

// runPreStop runs the preStop hook for at most grace seconds and returns
// the whole seconds it took. A failing hook is logged; the stop goes on.
func (m *Manager) runPreStop(ctx context.Context, pod *v1.Pod, spec *v1.Container, id string, podIPs []string, grace int64) int64 {
	start := m.cfg.Clock.Now()
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- m.runHook(hctx, pod, spec, id, podIPs, spec.Lifecycle.PreStop, time.Duration(grace)*time.Second)
	}()
	var err error
	select {
	case err = <-done:
	case <-m.cfg.Clock.After(time.Duration(grace) * time.Second):
		err = fmt.Errorf("preStop hook did not finish within %ds", grace)
		cancel()
		<-done
	case <-ctx.Done():
		err = ctx.Err()
		cancel()
		<-done
	}
	cancel()
	if err != nil {
		m.log.Info("preStop hook failed", zap.String("pod", podTarget(pod)), zap.String("container", spec.Name), zap.Error(err))
		m.containerEvent(pod, spec.Name, id, v1.EventTypeWarning, kubetypes.ReasonFailedPreStopHook, "PreStopHook failed")
	}
	return int64(m.cfg.Clock.Since(start) / time.Second)
}

// terminationOrdering makes sidecars wait for the containers that must stop
// before them: every regular container and every sidecar started after it.
type terminationOrdering struct {
	clock clock.Clock
	done  map[string]chan struct{}
	deps  map[string][]chan struct{}
	once  map[string]*sync.Once
}

func newTerminationOrdering(clk clock.Clock, pod *v1.Pod, victims []*kubetypes.Container) *terminationOrdering {
	// rank: -1 for regular containers, else the sidecar's start order.
	rank := make(map[string]int, len(victims))
	anySidecar := false
	if pod != nil {
		for i := range pod.Spec.InitContainers {
			if IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
				rank[pod.Spec.InitContainers[i].Name] = i
				anySidecar = true
			}
		}
	} else {
		// Orphan: the labels say which are sidecars; creation time gives the order.
		n := 0
		for i := len(victims) - 1; i >= 0; i-- { // victims are newest first
			if victims[i].Type == ContainerTypeSidecar {
				rank[victims[i].Name] = n
				n++
				anySidecar = true
			}
		}
	}
	if !anySidecar {
		return nil
	}
	o := &terminationOrdering{clock: clk, done: map[string]chan struct{}{}, deps: map[string][]chan struct{}{}, once: map[string]*sync.Once{}}
	for _, c := range victims {
		if _, dup := o.done[c.Name]; !dup {
			o.done[c.Name] = make(chan struct{})
			o.once[c.Name] = new(sync.Once)
		}
	}
	for name := range o.done {
		r, sidecar := rank[name]
		if !sidecar {
			continue
		}
		for other, ch := range o.done {
			if other == name {
				continue
			}
			or, otherSidecar := rank[other]
			if !otherSidecar || or > r {
				o.deps[name] = append(o.deps[name], ch)
			}
		}
	}
	return o
}

// waitForTurn blocks until the containers name must outlive have stopped,
// at most grace seconds, and returns the whole seconds waited.
func (o *terminationOrdering) waitForTurn(name string, grace int64) int64 {
	if o == nil || len(o.deps[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	timeout := o.clock.After(time.Duration(grace) * time.Second)
	for _, ch := range o.deps[name] {
		select {
		case <-ch:
		case <-timeout:
			return int64(o.clock.Since(start) / time.Second)
		}
	}
	return int64(o.clock.Since(start) / time.Second)
}

// terminated marks name as stopped.
func (o *terminationOrdering) terminated(name string) {
	if o == nil {
		return
	}
	if once := o.once[name]; once != nil {
		once.Do(func() { close(o.done[name]) })
	}
}
