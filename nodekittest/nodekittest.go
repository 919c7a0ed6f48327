package nodekittest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

// SourceName is the name of the pod source Start adds; SetPods sends on it.
// It is the API server's source name, so the pods count as API pods (not
// static, so not critical: they can be evicted), as in a cluster.
const SourceName = kubetypes.SourceAPI

// Harness is one agent running inside a testing/synctest bubble, with a
// record of what happened to its pods on the bubble's virtual clock.
type Harness struct {
	t       testing.TB
	agent   *nodekit.Agent
	rt      *fake.Runtime
	start   time.Time
	updates chan []*v1.Pod

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every record
	history map[string][]StatusRecord
	events  []ContainerEvent
}

// StatusRecord is one status the agent reported for a pod, and when.
type StatusRecord struct {
	// At is the virtual time since Start.
	At     time.Duration
	Status v1.PodStatus
}

// ContainerEvent is a container of a pod starting or stopping in the fake
// runtime, and when.
type ContainerEvent struct {
	// At is the virtual time since Start.
	At time.Duration
	// Pod and Container are the pod's and the container's names.
	Pod, Container string
	// Started is true for a start, false for a stop (exit or kill).
	Started bool
	// ExitCode is the exit code of a stop.
	ExitCode int32
}

// Start builds b and runs the agent; call it inside synctest.Test, so that
// every goroutine and timer of the agent lives in the bubble and time
// passes only when all of them wait. Start sets, on b:
//
//   - WithRootDir(t.TempDir());
//   - WithRand(func() float64 { return 0 }): no jitter, exact times;
//   - WithStatusSink: the harness records every status (History);
//   - a pod source named SourceName, fed by SetPods.
//
// b must use the fake runtime (WithFakeRuntime, or WithRuntime with a
// *fake.Runtime). The agent stops, and the test waits for it, at the end
// of the test (t.Cleanup); a Run error fails the test.
func Start(t testing.TB, b *nodekit.Builder) *Harness {
	t.Helper()
	h := &Harness{
		t:       t,
		start:   time.Now(), //nodekit:allow clock inside a synctest bubble time is the virtual clock the harness measures
		updates: make(chan []*v1.Pod),
		changed: make(chan struct{}),
		history: map[string][]StatusRecord{},
	}
	agent, err := b.
		WithRootDir(t.TempDir()).
		WithRand(func() float64 { return 0 }).
		WithStatusSink(h).
		WithPodSource(SourceName, func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return &source{out: out, in: h.updates}, nil
		}).
		Build()
	if err != nil {
		t.Fatalf("nodekittest: Build: %v", err)
	}
	h.agent = agent
	h.rt = agent.FakeRuntime()
	if h.rt == nil {
		if f, ok := agent.CRI().(*fake.Runtime); ok {
			h.rt = f
		}
	}
	if h.rt == nil {
		t.Fatal("nodekittest: the agent does not run on the fake runtime")
	}
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan *runtimeapi.ContainerEventResponse, 64)
	subscribed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = h.rt.GetContainerEvents(ctx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(subscribed) })
		close(events)
	}()
	<-subscribed // no container event of the agent's is missed
	go func() {
		defer wg.Done()
		for ev := range events {
			h.recordEvent(ev)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nodekittest: agent.Run: %v", err)
		}
		wg.Wait()
	})
	return h
}

// Agent is the agent under test.
func (h *Harness) Agent() *nodekit.Agent { return h.agent }

// Runtime is the agent's fake runtime.
func (h *Harness) Runtime() *fake.Runtime { return h.rt }

// Now is the virtual time since Start.
func (h *Harness) Now() time.Duration {
	return time.Since(h.start) //nodekit:allow clock the bubble's virtual clock
}

// SetPods makes the harness's source send pods as its whole set (a SET
// update). Pods without a config-source annotation get SourceName.
func (h *Harness) SetPods(pods ...*v1.Pod) {
	h.t.Helper()
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		p = p.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		if _, ok := p.Annotations[kubetypes.ConfigSourceAnnotation]; !ok {
			p.Annotations[kubetypes.ConfigSourceAnnotation] = SourceName
		}
		out[i] = p
	}
	select {
	case h.updates <- out:
	case <-time.After(time.Hour):
		h.t.Fatal("nodekittest: SetPods: the agent took no update for an hour of virtual time")
	}
}

// Advance lets d of virtual time pass, then waits until every goroutine of
// the bubble is blocked again: whatever was due by then has happened.
func (h *Harness) Advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// WaitFor lets virtual time pass until cond holds, at most limit, and
// returns the virtual time since Start when it first did. cond is checked
// after every status the agent reports and every container start or stop,
// once the bubble is idle; a wait that runs out fails the test with what.
func (h *Harness) WaitFor(what string, limit time.Duration, cond func() bool) time.Duration {
	h.t.Helper()
	deadline := time.After(limit)
	for {
		synctest.Wait()
		h.mu.Lock()
		changed := h.changed
		h.mu.Unlock()
		if cond() {
			return h.Now()
		}
		select {
		case <-changed:
		case <-deadline:
			h.t.Fatalf("nodekittest: %s: not within %v (at %v)", what, limit, h.Now())
		}
	}
}

// History is every status reported for the pod named name, oldest first.
func (h *Harness) History(name string) []StatusRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.history[name])
}

// Status is the latest status reported for the pod named name (zero if
// none).
func (h *Harness) Status(name string) v1.PodStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	hist := h.history[name]
	if len(hist) == 0 {
		return v1.PodStatus{}
	}
	return hist[len(hist)-1].Status
}

// Events is every container start and stop in the runtime, oldest first.
func (h *Harness) Events() []ContainerEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// Starts is when each instance of a pod's container started.
func (h *Harness) Starts(pod, container string) []time.Duration {
	var out []time.Duration
	for _, e := range h.Events() {
		if e.Started && e.Pod == pod && e.Container == container {
			out = append(out, e.At)
		}
	}
	return out
}

// SyncPodStatus records a status (podstatus.Sink).
func (h *Harness) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	h.record(func() {
		h.history[pod.Name] = append(h.history[pod.Name], StatusRecord{At: h.Now(), Status: *st.DeepCopy()})
	})
	return nil
}

func (h *Harness) record(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *Harness) recordEvent(ev *runtimeapi.ContainerEventResponse) {
	var started bool
	switch ev.GetContainerEventType() {
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		started = true
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
	default:
		return
	}
	for _, cs := range ev.GetContainersStatuses() {
		if cs.GetId() != ev.GetContainerId() {
			continue
		}
		e := ContainerEvent{
			At:  time.Unix(0, ev.GetCreatedAt()).Sub(h.start),
			Pod: ev.GetPodSandboxStatus().GetMetadata().GetName(), Container: cs.GetMetadata().GetName(),
			Started: started, ExitCode: cs.GetExitCode(),
		}
		h.record(func() { h.events = append(h.events, e) })
		return
	}
}

// String describes the harness's record, for failure messages.
func (h *Harness) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("at %v: %d container events, statuses of %d pods", time.Since(h.start), len(h.events), len(h.history)) //nodekit:allow clock the bubble's virtual clock
}

// source sends each set of pods it is given as a SET update.
type source struct {
	out chan<- kubetypes.PodUpdate
	in  <-chan []*v1.Pod
}

func (s *source) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.in:
			select {
			case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: SourceName}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
