package syncloop

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/podworkers"
)

func TestNewValidates(t *testing.T) {
	_, err := New(Config{SyncPeriod: -1, Admitters: []AdmitHandler{nil}, Root: "rel/dir"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	for _, field := range []string{"Updates", "Runtime", "PLEG", "SyncPeriod", "Admitters[0]", "Root"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	if l.cfg.SyncPeriod != time.Second || l.cfg.HousekeepingPeriod != 2*time.Second || l.cfg.RuntimeHealthPeriod != 5*time.Second {
		t.Fatalf("defaults: %+v", l.cfg)
	}
	if _, ok := l.StatusSink().(*podstatus.MemorySink); !ok {
		t.Fatal("default sink is not a MemorySink")
	}
}

// TestSyncLoopAbort: a closed config channel ends the loop.
func TestSyncLoopAbort(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		l, _, updates := ltStubLoop(t, clock.RealClock{}, nil)
		close(updates)
		if l.Iterate(t.Context()) {
			t.Fatal("Iterate returned true on a closed channel")
		}
		if err := l.Run(t.Context()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := l.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
			t.Fatalf("second Run: %v", err)
		}
	})
}

func TestIterateStopsOnContext(t *testing.T) {
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l.Iterate(ctx) {
		t.Fatal("Iterate returned true with ctx done")
	}
}

// TestGetPodsToSync: due pods from the work queue and pods past their
// active deadline are synced; others are not.
func TestGetPodsToSync(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	l, _, _ := ltStubLoop(t, clk, nil)
	pods := []*v1.Pod{ltPod("a", "a", 0), ltPod("b", "b", 1), ltPod("c", "c", 2), ltPod("d", "d", 3)}
	deadline := int64(30)
	pods[3].Spec.ActiveDeadlineSeconds = &deadline
	start := metav1.NewTime(ltEpoch.Add(-time.Minute))
	pods[3].Status.StartTime = &start
	l.HandlePodAdditions(pods)
	q := l.PodWorkers().WorkQueue()
	q.Enqueue("a", 0)
	q.Enqueue("b", time.Second)
	q.Enqueue("c", time.Hour)
	clk.Step(2 * time.Second)
	var got []types.UID
	for _, p := range l.PodsToSync() {
		got = append(got, p.UID)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "d" {
		t.Fatalf("pods to sync: %v", got)
	}
}

func ltPortPod(uid string, created int, port int32) *v1.Pod {
	p := ltPod(uid, uid, created)
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port}}
	return p
}

// TestHandlePortConflicts: of two pods asking for one host port, the newer
// is rejected (Failed, NodePorts, "Pod was rejected: ...") and gets no
// worker.
func TestHandlePortConflicts(t *testing.T) {
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	older, newer, other := ltPortPod("old", 0, 8080), ltPortPod("new", 5, 8080), ltPortPod("other", 6, 8081)
	l.HandlePodAdditions([]*v1.Pod{newer, other, older})
	st, ok := l.StatusManager().GetPodStatus("new")
	if !ok || st.Phase != v1.PodFailed || st.Reason != ReasonNodePorts || !strings.HasPrefix(st.Message, "Pod was rejected: Predicate NodePorts failed") {
		t.Fatalf("newer pod: %v %+v", ok, st)
	}
	if _, ok := ltWorkerState(l.PodWorkers(), "new"); ok {
		t.Fatal("rejected pod got a worker")
	}
	for _, uid := range []types.UID{"old", "other"} {
		if _, ok := ltWorkerState(l.PodWorkers(), uid); !ok {
			t.Fatalf("%s not handed to the workers", uid)
		}
		if st, ok := l.StatusManager().GetPodStatus(uid); ok && st.Phase == v1.PodFailed {
			t.Fatalf("%s failed", uid)
		}
	}
	// The rejected pod is known but not active: it holds no port.
	if len(l.Pods()) != 3 || len(l.activePodsExcept("")) != 2 {
		t.Fatalf("pods %d active %d", len(l.Pods()), len(l.activePodsExcept("")))
	}
}

// TestHandleMemExceeded: the newer pod that does not fit the node's memory
// is rejected with OutOfmemory and the kubelet's message.
func TestHandleMemExceeded(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("10"), v1.ResourceMemory: resource.MustParse("100"), v1.ResourcePods: resource.MustParse("40")}
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), func(c *Config) {
		c.NodeAllocatable = func() v1.ResourceList { return alloc }
	})
	mk := func(uid string, created int, mem string) *v1.Pod {
		p := ltPod(uid, uid, created)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}
		return p
	}
	l.HandlePodAdditions([]*v1.Pod{mk("new", 5, "90"), mk("old", 0, "90"), mk("small", 6, "10")})
	st, _ := l.StatusManager().GetPodStatus("new")
	want := "Pod was rejected: Node didn't have enough resource: memory, requested: 90, used: 90, capacity: 100"
	if st.Phase != v1.PodFailed || st.Reason != ReasonOutOfMemory || st.Message != want {
		t.Fatalf("newer pod: %+v", st)
	}
	if st, ok := l.StatusManager().GetPodStatus("small"); ok && st.Phase == v1.PodFailed {
		t.Fatal("a fitting pod was rejected")
	}
}

func TestFitResources(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	withReq := func(cpu, mem string) v1.Container {
		return v1.Container{Name: "c" + cpu + mem, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers:     []v1.Container{withReq("100m", "10"), withReq("200m", "10")},
		InitContainers: []v1.Container{withReq("1", "5"), withReq("50m", "30")},
		Overhead:       v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
	}}
	pod.Spec.InitContainers[1].RestartPolicy = &always // a sidecar: adds to the regular sum
	got := podRequests(pod)
	// cpu: max(100+200+50, 1000) + 10; memory: max(10+10+30, 5, 30) = 50.
	if got[v1.ResourceCPU] != 1010 || got[v1.ResourceMemory] != 50 {
		t.Fatalf("requests %v", got)
	}

	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourcePods: resource.MustParse("1")}
	a := &resourceFitAdmitter{allocatable: func() v1.ResourceList { return alloc }}
	r := a.Admit(pod, nil)
	if r.Admit || r.Reason != ReasonOutOfCPU || !strings.Contains(r.Message, "cpu, requested: 1010, used: 0, capacity: 1000") {
		t.Fatalf("cpu: %+v", r)
	}
	r = a.Admit(&v1.Pod{}, []*v1.Pod{{}})
	if r.Admit || r.Reason != ReasonOutOfPods {
		t.Fatalf("pods: %+v", r)
	}
	// Resources the node does not list are not checked.
	small := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("3")}}}}}}
	if r := a.Admit(small, nil); !r.Admit {
		t.Fatalf("unlisted resource: %+v", r)
	}
	if r := (&resourceFitAdmitter{}).Admit(pod, nil); !r.Admit {
		t.Fatal("no allocatable: must admit")
	}
}

func TestHostPortConflicts(t *testing.T) {
	mk := func(ip string, proto v1.Protocol, port int32) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(ip + string(proto))}, Spec: v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{{HostIP: ip, Protocol: proto, HostPort: port}}}}}}
	}
	for _, c := range []struct {
		a, b     *v1.Pod
		conflict bool
	}{
		{mk("", "", 80), mk("", v1.ProtocolTCP, 80), true},
		{mk("", v1.ProtocolUDP, 80), mk("", v1.ProtocolTCP, 80), false},
		{mk("10.0.0.1", "", 80), mk("10.0.0.2", "", 80), false},
		{mk("10.0.0.1", "", 80), mk("0.0.0.0", "", 80), true},
		{mk("", "", 80), mk("", "", 81), false},
		{mk("", "", 0), mk("", "", 0), false},
	} {
		r := hostPortAdmitter{}.Admit(c.b, []*v1.Pod{c.a})
		if r.Admit == c.conflict {
			t.Errorf("%v vs %v: %+v", c.a.Spec.Containers[0].Ports, c.b.Spec.Containers[0].Ports, r)
		}
	}
}

func TestExtraAdmitterAndTerminalPodsSkipAdmission(t *testing.T) {
	var calls int
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), func(c *Config) {
		c.Admitters = []AdmitHandler{AdmitFunc(func(pod *v1.Pod, _ []*v1.Pod) AdmitResult {
			calls++
			return AdmitResult{Reason: "Evicted", Message: "node under pressure"}
		})}
	})
	done := ltPod("done", "done", 0)
	done.Status.Phase = v1.PodSucceeded
	l.HandlePodAdditions([]*v1.Pod{done, ltPod("x", "x", 1)})
	if calls != 1 {
		t.Fatalf("admitter called %d times", calls)
	}
	st, _ := l.StatusManager().GetPodStatus("x")
	if st.Reason != "Evicted" || st.Message != "Pod was rejected: node under pressure" {
		t.Fatalf("status %+v", st)
	}
	if _, ok := ltWorkerState(l.PodWorkers(), "done"); !ok {
		t.Fatal("terminal pod not handed to its worker")
	}
}

// TestHandlePodRemovesWhenSourcesAreReady: a removal kills the pod only
// once every source is ready; before, neither the removal nor housekeeping
// kills it.
func TestHandlePodRemovesWhenSourcesAreReady(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		var ready atomic.Bool
		l, stub, _ := ltStubLoop(t, clock.RealClock{}, func(c *Config) { c.SourcesReady = ready.Load })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.PodWorkers().Run(ctx) }()
		pod := ltPod("1", "web", 0)
		l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{pod}})
		synctest.Wait()
		l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{pod}})
		if err := l.HandlePodCleanups(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, kills, gcs := stub.counts(); kills != 0 || gcs != 0 || l.PodWorkers().IsPodTerminationRequested("1") {
			t.Fatalf("before the sources were ready: kills %d gcs %d", kills, gcs)
		}
		ready.Store(true)
		pod2 := ltPod("2", "db", 1)
		l.HandlePodAdditions([]*v1.Pod{pod2})
		synctest.Wait()
		l.HandlePodRemoves([]*v1.Pod{pod2})
		synctest.Wait()
		if stub.killed("2") != 1 || stub.killed("1") != 0 {
			t.Fatal("removal not killed once the sources were ready")
		}
		// Housekeeping now kills the pod removed earlier.
		if err := l.HandlePodCleanups(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if stub.killed("1") != 1 {
			t.Fatal("housekeeping did not kill the removed pod")
		}
		cancel()
		<-done
	})
}

// TestDispatchWorkOfCompletedPod: pods already terminal are never set up.
func TestDispatchWorkOfCompletedPod(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		l, stub, _ := ltStubLoop(t, clock.RealClock{}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.PodWorkers().Run(ctx) }()
		var pods []*v1.Pod
		for i, phase := range []v1.PodPhase{v1.PodFailed, v1.PodSucceeded, v1.PodFailed} {
			p := ltPod(string(rune('a'+i)), string(rune('a'+i)), i)
			p.Status.Phase = phase
			pods = append(pods, p)
		}
		now := metav1.NewTime(time.Now())
		pods[2].DeletionTimestamp = &now
		l.HandlePodAdditions(pods)
		synctest.Wait()
		if syncs, _, _ := stub.counts(); syncs != 0 {
			t.Fatalf("runtime SyncPod called %d times", syncs)
		}
		for _, p := range pods {
			if !l.PodWorkers().ShouldPodBeFinished(p.UID) {
				t.Errorf("%s not finished", p.UID)
			}
			if st, ok := l.StatusManager().GetPodStatus(p.UID); st.Phase != p.Status.Phase {
				t.Errorf("%s phase %s %v", p.UID, st.Phase, ok)
			}
		}
		cancel()
		<-done
	})
}

// The runtime being down (or the PLEG unhealthy) stops all dispatching;
// the loop backs off 100ms, doubling.
func TestRuntimeDownDispatchesNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	e := ltNew(t, clk, nil)
	if err := e.plg.Relist(t.Context()); err != nil { // the PLEG is healthy
		t.Fatal(err)
	}
	e.rt.SetRuntimeReady(false)
	e.updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{ltPod("1", "web", 0)}}
	iterate := func() {
		t.Helper()
		res := make(chan bool, 1)
		go func() { res <- e.loop.Iterate(t.Context()) }()
		for clk.Waiters() < 3 { // the sync and housekeeping tickers, the back-off timer
			select {
			case <-res:
				t.Fatal("Iterate did not wait")
			default:
			}
			runtime.Gosched()
		}
		clk.Step(5 * time.Second)
		if !<-res {
			t.Fatal("Iterate returned false")
		}
	}
	iterate()
	iterate()
	if len(e.updates) != 1 || len(e.loop.Pods()) != 0 {
		t.Fatal("dispatched while the runtime is down")
	}
	if e.loop.runtimeBackoff != 400*time.Millisecond {
		t.Fatalf("backoff %v", e.loop.runtimeBackoff)
	}
	rt, _, err := e.loop.RuntimeReady()
	if rt || !errors.Is(err, ErrRuntimeDown) {
		t.Fatalf("RuntimeReady: %v %v", rt, err)
	}
	select {
	case <-e.loop.Ready():
		t.Fatal("Ready while the runtime is down")
	default:
	}

	e.rt.SetRuntimeReady(true)
	if err := e.loop.UpdateRuntimeHealth(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.plg.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	ltIterateUntil(t, e.loop, func() bool { return len(e.loop.Pods()) == 1 })
	<-e.loop.Ready()
	if e.loop.runtimeBackoff != runtimeBackoffMin {
		t.Fatal("backoff not reset")
	}
}

func TestPLEGUnhealthyGates(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	healthy := false
	l, _, updates := ltStubLoop(t, clk, func(c *Config) {
		c.PLEG = ltPLEG{healthy: func() (bool, error) { return healthy, errors.New("relist stalled") }}
	})
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{ltPod("1", "web", 0)}}
	res := make(chan bool, 1)
	go func() { res <- l.Iterate(t.Context()) }()
	for clk.Waiters() < 3 {
		runtime.Gosched()
	}
	clk.Step(time.Second)
	<-res
	if len(updates) != 1 {
		t.Fatal("dispatched while the PLEG is unhealthy")
	}
	if rt, _, err := l.RuntimeReady(); rt || !errors.Is(err, ErrPLEGUnhealthy) {
		t.Fatalf("RuntimeReady: %v %v", rt, err)
	}
	healthy = true
	ltIterateUntil(t, l, func() bool { return len(l.Pods()) == 1 })
}

// A pod on the pod network waits for the network (a ~1s back-off); a
// host-network pod does not.
func TestSyncPodWaitsForNetwork(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	e := ltNew(t, clk, nil)
	e.rt.SetNetworkReady(false)
	if err := e.plg.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.loop.UpdateRuntimeHealth(t.Context()); err != nil {
		t.Fatal(err)
	}
	rt, net, err := e.loop.RuntimeReady()
	if !rt || net || !errors.Is(err, ErrNetworkNotReady) {
		t.Fatalf("RuntimeReady %v %v %v", rt, net, err)
	}
	pod := ltPod("1", "web", 0)
	_, err = e.loop.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil)
	var be podworkers.BackoffError
	if !errors.As(err, &be) || !errors.Is(err, ErrNetworkNotReady) || be.BackoffUntil() != ltEpoch.Add(time.Second) {
		t.Fatalf("SyncPod: %v", err)
	}
	if n := e.rt.CountCalls("RunPodSandbox"); n != 0 {
		t.Fatal("sandbox created without network")
	}
	pod.Spec.HostNetwork = true
	if _, err := e.loop.podSyncer.SyncPod(t.Context(), podworkers.SyncPodCreate, pod, nil, nil); err != nil {
		t.Fatalf("host network pod: %v", err)
	}
	if n := e.rt.CountCalls("RunPodSandbox"); n != 1 {
		t.Fatalf("RunPodSandbox calls %d", n)
	}
}

// SET is diffed against the known pods of its source.
func TestHandleSet(t *testing.T) {
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	a, b, c := ltPod("a", "a", 0), ltPod("b", "b", 1), ltPod("c", "c", 2)
	for _, p := range []*v1.Pod{a, b, c} {
		p.Annotations[kubetypes.ConfigSourceAnnotation] = "file"
	}
	other := ltPod("o", "o", 3)
	other.Annotations[kubetypes.ConfigSourceAnnotation] = "http"
	l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceAll, Pods: []*v1.Pod{a, b, other}})
	if len(l.Pods()) != 3 {
		t.Fatalf("pods %d", len(l.Pods()))
	}
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "busybox:2"
	l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.SET, Source: "file", Pods: []*v1.Pod{a2, c}})
	var got []types.UID
	for _, p := range l.Pods() {
		got = append(got, p.UID)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "c" || got[2] != "o" {
		t.Fatalf("pods after SET: %v", got)
	}
	if p, _ := l.Pod("a"); p.Spec.Containers[0].Image != "busybox:2" {
		t.Fatal("update not applied")
	}
	if !l.PodWorkers().IsPodTerminationRequested("b") {
		t.Fatal("b not killed")
	}
	l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceAll})
	if len(l.Pods()) != 0 {
		t.Fatal("empty SET of all sources kept pods")
	}
}

func TestHandleEventAndReconcile(t *testing.T) {
	l, _, _ := ltStubLoop(t, clocktesting.NewFakeClock(ltEpoch), nil)
	pod := ltPod("1", "web", 0)
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	l.HandlePodAdditions([]*v1.Pod{pod})
	l.HandleEvent(&kubetypes.PodLifecycleEvent{ID: "unknown", Type: kubetypes.ContainerDied})
	l.HandleEvent(nil)
	if _, ok := ltWorkerState(l.PodWorkers(), "unknown"); ok {
		t.Fatal("event of an unknown pod started a worker")
	}
	// The status manager has the pod not ready; the API now says the gate
	// is True, but the containers are not ready: no change, no sync needed.
	l.StatusManager().SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}})
	p2 := pod.DeepCopy()
	p2.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}
	if l.needsReadinessReconcile(p2) {
		t.Fatal("reconcile without a readiness change")
	}
	l.StatusManager().SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}})
	p3 := pod.DeepCopy()
	p3.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionFalse}}
	if !l.needsReadinessReconcile(p3) {
		t.Fatal("gate turned False but no reconcile")
	}
	l.HandlePodReconcile([]*v1.Pod{p3})
	if p, _ := l.Pod("1"); p != p3 {
		t.Fatal("reconciled pod not recorded")
	}
}

// Housekeeping kills orphaned runtime pods, re-creates desired pods the
// workers forgot, collects garbage every ContainerGCPeriod, forgets gone
// pods and sets the running gauges.
func TestHousekeeping(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	reg := prometheus.NewRegistry()
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) { c.Registerer = reg })
	stub.pods = []*kubetypes.Pod{
		{ID: "orphan", Name: "o", Sandboxes: []*kubetypes.Container{{ID: "s1", State: kubetypes.ContainerStateRunning}},
			Containers: []*kubetypes.Container{{ID: "c1", State: kubetypes.ContainerStateRunning}, {ID: "c0", State: kubetypes.ContainerStateExited}}},
		{ID: "dead", Name: "d", Sandboxes: []*kubetypes.Container{{ID: "s2", State: kubetypes.ContainerStateExited}}},
	}
	l.HandlePodAdditions([]*v1.Pod{ltPod("1", "web", 0)})
	if err := l.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, ok := ltWorkerState(l.PodWorkers(), "orphan"); !ok || st != podworkers.TerminatingPod {
		t.Fatalf("orphan: %v %v", st, ok)
	}
	if _, ok := ltWorkerState(l.PodWorkers(), "dead"); ok {
		t.Fatal("a runtime pod that runs nothing was killed")
	}
	if stub.gcs != 1 || !stub.gcReady[0] {
		t.Fatalf("gc %d %v", stub.gcs, stub.gcReady)
	}
	if err := l.HandlePodCleanups(t.Context()); err != nil || stub.gcs != 1 {
		t.Fatalf("gc before its period: %d %v", stub.gcs, err)
	}
	clk.Step(time.Minute)
	_ = l.HandlePodCleanups(t.Context())
	if stub.gcs != 2 {
		t.Fatalf("gc after its period: %d", stub.gcs)
	}
	if v := testutil.ToFloat64(l.metrics.runningPods); v != 1 {
		t.Fatalf("running pods %v", v)
	}
	if v := testutil.ToFloat64(l.metrics.runningContainers.WithLabelValues("running")); v != 1 {
		t.Fatalf("running containers %v", v)
	}
	if v := testutil.ToFloat64(l.metrics.runningContainers.WithLabelValues("exited")); v != 1 {
		t.Fatalf("exited containers %v", v)
	}
	// A desired pod the workers don't know (finished, same UID back) is
	// started again; a pod that is gone is forgotten by the runtime. Pod
	// workers that never saw pod 1 stand in for ones that forgot it.
	fresh, err := podworkers.New(podworkers.Config{Syncer: l.podSyncer, Cache: l.cfg.PLEG, Clock: l.cfg.Clock})
	if err != nil {
		t.Fatal(err)
	}
	l.workers = fresh
	l.seen["gone"] = struct{}{}
	_ = l.HandlePodCleanups(t.Context())
	if _, ok := ltWorkerState(l.PodWorkers(), "1"); !ok {
		t.Fatal("desired pod not restarted")
	}
	if len(stub.forgot) != 1 || stub.forgot[0] != "gone" {
		t.Fatalf("forgot %v", stub.forgot)
	}
	l.HandleUpdate(kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: "file", Pods: []*v1.Pod{ltPod("1", "web", 0)}})
	if v := testutil.ToFloat64(l.metrics.configUpdates.WithLabelValues("file", "UPDATE")); v != 1 {
		t.Fatalf("config updates %v", v)
	}
}

// A loop run end to end with stubs: Run starts and joins everything.
func TestRunJoins(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		l, stub, updates := ltStubLoop(t, clock.RealClock{}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Run(ctx) }()
		updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{ltPod("1", "web", 0)}}
		synctest.Wait()
		<-l.Ready()
		if syncs, _, _ := stub.counts(); syncs != 1 {
			t.Fatalf("syncs %d", syncs)
		}
		if st, ok := l.StatusSink().(*podstatus.MemorySink).Get("1"); !ok || st.Phase != v1.PodPending {
			t.Fatalf("status %v %+v", ok, st)
		}
		cancel()
		wg.Wait()
	})
}

// ltIterateUntil iterates (the select may pick a tick first) until cond.
func ltIterateUntil(t *testing.T, l *Loop, cond func() bool) {
	t.Helper()
	for range 10 {
		if !l.Iterate(t.Context()) {
			t.Fatal("Iterate returned false")
		}
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached")
}

// With a PLEG that hands out its last listing (at most 2s old),
// housekeeping takes its listing from there and does not list the
// runtime; an orphan in it is killed as from the runtime's own listing.
func TestHousekeepingUsesPLEGListing(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	var asked int
	l, stub, _ := ltStubLoop(t, clk, func(c *Config) {
		c.PLEG = ltListingPLEG{listing: func() ([]*kubetypes.Pod, time.Time) {
			asked++
			return []*kubetypes.Pod{{ID: "orphan", Name: "o", Sandboxes: []*kubetypes.Container{{ID: "s1", State: kubetypes.ContainerStateRunning}}}}, clk.Now()
		}}
	})
	// The runtime's own listing would show nothing to kill.
	stub.pods = nil
	if err := l.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if asked != 1 {
		t.Fatalf("PLEG listing asked %d times, want 1", asked)
	}
	if st, ok := ltWorkerState(l.PodWorkers(), "orphan"); !ok || st != podworkers.TerminatingPod {
		t.Fatalf("orphan from the PLEG listing: %v %v", st, ok)
	}
}

// TestRunFailsFastOnAComponent: a component that returns before ctx ends
// (here the status manager, already run by someone else, returns
// ErrAlreadyRan) stops the loop and the other components; Run returns an
// error naming it and wrapping its error.
func TestRunFailsFastOnAComponent(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := ltStubLoop(t, clock.RealClock{}, nil)
		sctx, stopStatus := context.WithCancel(t.Context())
		statusDone := make(chan error, 1)
		go func() { statusDone <- l.StatusManager().Run(sctx) }()
		synctest.Wait()

		err := l.Run(t.Context()) // returns although t.Context() is live
		if !errors.Is(err, ErrComponentStopped) || !errors.Is(err, lifecycle.ErrStoppedEarly) ||
			!errors.Is(err, ErrAlreadyRan) || !strings.Contains(err.Error(), ": status: ") {
			t.Fatalf("Run = %v, want ErrComponentStopped naming the status manager", err)
		}
		stopStatus()
		if err := <-statusDone; err != nil {
			t.Fatalf("status manager Run = %v", err)
		}
	})
}
