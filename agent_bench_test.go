package nodekit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/syncloop"
)

// benchPod is what benchSink keeps of a pod's status.
type benchPod struct {
	phase       v1.PodPhase
	containerID string // of the first container, "" if none yet
	running     bool
	restarts    int32
}

// benchSink keeps the little the benchmarks look at, counts Running pods
// and signals every change.
type benchSink struct {
	mu      sync.Mutex
	pods    map[string]benchPod
	running int
	changed chan struct{}
}

func newBenchSink() *benchSink {
	return &benchSink{pods: map[string]benchPod{}, changed: make(chan struct{}, 1)}
}

func (s *benchSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	p := benchPod{phase: st.Phase}
	if len(st.ContainerStatuses) > 0 {
		c := st.ContainerStatuses[0]
		p.containerID, p.running, p.restarts = c.ContainerID, c.State.Running != nil, c.RestartCount
	}
	s.mu.Lock()
	old := s.pods[pod.Name]
	if old.phase == v1.PodRunning {
		s.running--
	}
	if p.phase == v1.PodRunning {
		s.running++
	}
	s.pods[pod.Name] = p
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return nil
}

func (s *benchSink) get(name string) benchPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[name]
}

func (s *benchSink) runningPods() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// await returns once cond holds, checking it on every sink change and every
// 20ms; it fails tb after timeout. It never sleeps.
func (s *benchSink) await(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-s.changed:
		case <-tick.C:
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func benchManifests(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	for i := range n {
		name := fmt.Sprintf("p%04d", i)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(agenttest.PodManifest(name, agenttest.Forever)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// benchAgent builds an agent on the fake runtime with the real clock.
func benchAgent(tb testing.TB, dir string, sink *benchSink, extra func(*nodekit.Builder)) *nodekit.Agent {
	tb.Helper()
	bld := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(tb.TempDir()).
		WithStatusSink(sink)
	if extra != nil {
		extra(bld)
	}
	a, err := bld.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// runBench runs a in the background; the returned func stops it and waits.
func runBench(tb testing.TB, a *nodekit.Agent) func() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				tb.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			tb.Fatal("the agent did not stop within 60s")
		}
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgentStartPods: the whole agent on the fake runtime taking N
// static pods from a manifest directory to Running (as the status sink
// sees them). Reported: pods/s (wall clock from Run to the last Running)
// and cpu-ns/pod (the process's user+system CPU over the same span, so it
// includes the fake runtime's share).
func BenchmarkAgentStartPods(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var wall, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				dir := benchManifests(b, n)
				sink := newBenchSink()
				a := benchAgent(b, dir, sink, nil)
				cpu0, t0 := cpuTime(b), time.Now()
				b.StartTimer()

				stop := runBench(b, a)
				sink.await(b, 5*time.Minute, fmt.Sprintf("%d pods Running", n), func() bool { return sink.runningPods() == n })

				b.StopTimer()
				wall += time.Since(t0)
				cpu += cpuTime(b) - cpu0
				stop()
				b.StartTimer()
			}
			pods := float64(n * b.N)
			b.ReportMetric(pods/wall.Seconds(), "pods/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/pods, "cpu-ns/pod")
		})
	}
}

// BenchmarkContainerExitToStatus: with N pods running, one container exits
// (fake.Runtime.ExitContainer) and the time until the pod's status in the
// sink shows it (the container no longer running, or restarted) is
// measured. Each iteration takes the next pod in turn (so that no pod is in
// crash-loop back-off), waits for it to run again and then for a random
// part of the relist period, so exits fall at any phase of it. Reported:
// p50-ms, p99-ms and max-ms over b.N exits. The generic PLEG relists every
// second, so the latency is bounded by that period plus a pod sync.
func BenchmarkContainerExitToStatus(b *testing.B) {
	for _, mode := range []string{"relist", "evented"} {
		for _, n := range []int{10, 100} {
			b.Run(fmt.Sprintf("pleg=%s/pods=%d", mode, n), func(b *testing.B) {
				benchExitToStatus(b, n, mode == "evented", nil)
			})
		}
	}
}

// benchExitToStatus measures it; more, if not nil, adds to the Builder.
func benchExitToStatus(b *testing.B, n int, evented bool, more func(*nodekit.Builder)) {
	b.ReportAllocs()
	sink := newBenchSink()
	extra := more
	var ev *eventedWiring
	if evented {
		ev = &eventedWiring{tb: b}
		extra = func(bld *nodekit.Builder) {
			ev.wire(bld)
			if more != nil {
				more(bld)
			}
		}
	}
	a := benchAgent(b, benchManifests(b, n), sink, extra)
	if ev != nil {
		ev.agent = a
	}
	stop := runBench(b, a)
	defer stop()
	sink.await(b, 2*time.Minute, fmt.Sprintf("%d pods Running", n), func() bool { return sink.runningPods() == n })
	if ev != nil && !ev.pleg.InUse() {
		b.Fatal("the evented PLEG is not following container events")
	}
	rt := a.FakeRuntime()

	var lat []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		name := fmt.Sprintf("p%04d-node1", i%n)
		i++
		var before benchPod
		sink.await(b, time.Minute, name+" running", func() bool {
			before = sink.get(name)
			return before.running && before.containerID != ""
		})
		id := runningContainerOf(b, rt, name)
		// The status came from a relist: exiting at once would
		// always land just after one. Exit at a random phase of
		// the relist period instead.
		<-time.After(time.Duration(rand.Int64N(int64(1100 * time.Millisecond))))
		b.StartTimer()

		t0 := time.Now()
		if err := rt.ExitContainer(id, 1, ""); err != nil {
			b.Fatal(err)
		}
		sink.await(b, time.Minute, name+" exit in status", func() bool {
			p := sink.get(name)
			return !p.running || p.restarts > before.restarts || p.containerID != before.containerID
		})
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// eventedWiring is what a Builder option WithEventedPLEG would do, done
// through the Builder's public hooks: an EventedPLEG over the agent's
// runtime engine, following the fake runtime's GetContainerEvents, replaces
// the GenericPLEG as the sync loop's cache, event stream and health. (The
// agent's own GenericPLEG still runs, unread; the Agent has no way yet to
// run an EventedPLEG in its place.)
type eventedWiring struct {
	tb     testing.TB
	agent  *nodekit.Agent // set once Build returned, before Run
	pleg   *pleg.EventedPLEG
	events chan *kubetypes.PodLifecycleEvent
}

func (w *eventedWiring) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return w.agent.FakeRuntime().GetContainerEvents(ctx, ch, cb)
}

func (w *eventedWiring) wire(bld *nodekit.Builder) {
	bld.WithSyncLoopConfig(func(cfg *syncloop.Config) {
		rt, ok := cfg.Runtime.(pleg.Runtime)
		if !ok {
			w.tb.Fatal("the sync loop's runtime is not a pleg.Runtime")
		}
		ev, err := pleg.NewEvented(pleg.EventedConfig{Config: pleg.Config{Runtime: rt}, Events: w})
		if err != nil {
			w.tb.Fatal(err)
		}
		w.pleg, w.events = ev, make(chan *kubetypes.PodLifecycleEvent, pleg.DefaultChannelCapacity)
		// Only the required PLEG methods, as before (no observer, no listing).
		cfg.PLEG, cfg.Events = struct{ syncloop.PLEG }{ev}, w.events
	})
	bld.WithPart("evented pleg", func(ctx context.Context) error {
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-w.pleg.Watch():
					select {
					case w.events <- e:
					case <-ctx.Done():
						return
					}
				}
			}
		})
		err := w.pleg.Run(ctx)
		wg.Wait()
		return err
	})
}

// runningContainerOf returns the ID of the running container of the pod
// named name.
func runningContainerOf(tb testing.TB, rt interface {
	ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}, name string) string {
	tb.Helper()
	cs, err := rt.ListContainers(tb.Context(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{kuberuntime.LabelPodName: name},
	})
	if err != nil || len(cs) != 1 {
		tb.Fatalf("running containers of %s: %v, %v", name, cs, err)
	}
	return cs[0].Id
}
