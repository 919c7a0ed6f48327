package cpumanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// pinnedCtr is a running container of the fake runtime with a cpuset.
type pinnedCtr struct {
	pod    *v1.Pod
	name   string
	cpuset string
}

// fakeWith starts a fake runtime whose running containers are ctrs, each
// created with its cpuset (as the runtime does with ContainerCPUSet).
func fakeWith(t *testing.T, ctrs ...pinnedCtr) *fake.Runtime {
	t.Helper()
	ctx := t.Context()
	rt, err := fake.New(fake.Config{Images: []string{"busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	sandboxes := map[string]string{}
	for _, c := range ctrs {
		uid := string(c.pod.UID)
		sb, ok := sandboxes[uid]
		if !ok {
			sb, err = rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: c.pod.Name, Namespace: c.pod.Namespace, Uid: uid},
				Labels:   map[string]string{labelPodUID: uid},
			}, "")
			if err != nil {
				t.Fatal(err)
			}
			sandboxes[uid] = sb
		}
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.name},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			Command:  []string{"sleep", "3600"},
			Labels:   map[string]string{labelPodUID: uid, labelContainerName: c.name},
			Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpusetCpus: c.cpuset}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// startRebuilt writes a corrupt checkpoint, then starts a static manager
// on a 1-socket 4-core machine without hyper-threads (cpus 0-3, cpu 0
// reserved) over rt with the given active pods.
func startRebuilt(t *testing.T, rt Runtime, current func(context.Context, string) (string, error), pods ...*v1.Pod) (*Manager, string) {
	t.Helper()
	dir := t.TempDir()
	writeState(t, dir, `{"policyName":"static",`)
	m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 1, 1), NumReservedCPUs: 1,
		StateDir: dir, Runtime: rt, CurrentCPUSet: current})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), func() []*v1.Pod { return pods }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err != nil {
		t.Errorf("corrupt checkpoint not set aside: %v", err)
	}
	return m, dir
}

func wantCPUs(t *testing.T, m *Manager, uid, name, want string, wantExcl bool) {
	t.Helper()
	got, excl := m.GetCPUSet(uid, name)
	if got.String() != want || excl != wantExcl {
		t.Errorf("GetCPUSet(%s, %s) = %s exclusive %v, want %s exclusive %v", uid, name, got, excl, want, wantExcl)
	}
}

func TestRebuildFromRunningContainers(t *testing.T) {
	a, b := pod("a", true, "1"), pod("b", true, "2")
	rt := fakeWith(t, pinnedCtr{a, "c0", "1"}, pinnedCtr{b, "c0", "2-3"})
	m, dir := startRebuilt(t, rt, nil, a, b)
	wantCPUs(t, m, "a", "c0", "1", true)
	wantCPUs(t, m, "b", "c0", "2-3", true)
	if got := m.DefaultCPUSet().String(); got != "0" {
		t.Errorf("default = %s, want 0", got)
	}
	// The rebuilt state was written: a restart reads it as a valid state.
	again := started(t, newStatic(t, mustTopo(t, 1, 4, 1, 1), 1, dir))
	wantCPUs(t, again, "b", "c0", "2-3", true)
	if got := again.DefaultCPUSet().String(); got != "0" {
		t.Errorf("after restart default = %s, want 0", got)
	}
	// The restored CPUs are really taken: a new 1-cpu pod finds none free.
	if err := m.AllocatePod(pod("c", true, "1")); !errors.Is(err, ErrNotEnoughCPUs) {
		t.Errorf("allocation on a rebuilt full machine: %v", err)
	}
}

func TestRebuildLeavesOutInconsistentContainers(t *testing.T) {
	ok := pod("ok", true, "1")
	overA, overB := pod("overa", true, "2"), pod("overb", true, "1") // 1-2 and 2 overlap
	res := pod("res", true, "2")                                     // 0-1 holds reserved cpu 0
	wrongSize := pod("size", true, "1")                              // 2 cpus for a 1-cpu request
	burst := pod("burst", false, "1")                                // not Guaranteed
	frac := pod("frac", true, "1500m")                               // not whole cpus
	gone := pod("gone", true, "1")                                   // not among the active pods
	for _, tc := range []struct {
		name string
		ctrs []pinnedCtr
		pods []*v1.Pod
	}{
		{"overlapping", []pinnedCtr{{ok, "c0", "3"}, {overA, "c0", "1-2"}, {overB, "c0", "2"}}, []*v1.Pod{ok, overA, overB}},
		{"reserved cpu", []pinnedCtr{{ok, "c0", "3"}, {res, "c0", "0-1"}}, []*v1.Pod{ok, res}},
		{"size differs from the request", []pinnedCtr{{ok, "c0", "3"}, {wrongSize, "c0", "1-2"}}, []*v1.Pod{ok, wrongSize}},
		{"not guaranteed", []pinnedCtr{{ok, "c0", "3"}, {burst, "c0", "1"}}, []*v1.Pod{ok, burst}},
		{"fractional request", []pinnedCtr{{ok, "c0", "3"}, {frac, "c0", "1"}}, []*v1.Pod{ok, frac}},
		{"inactive pod", []pinnedCtr{{ok, "c0", "3"}, {gone, "c0", "1"}}, []*v1.Pod{ok}},
		{"unknown container", []pinnedCtr{{ok, "c0", "3"}, {ok, "extra", "1"}}, []*v1.Pod{ok}},
		{"cpus outside the machine", []pinnedCtr{{ok, "c0", "3"}, {gone, "c0", "9"}}, []*v1.Pod{ok, gone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := startRebuilt(t, fakeWith(t, tc.ctrs...), nil, tc.pods...)
			wantCPUs(t, m, "ok", "c0", "3", true)
			if len(m.st.entries) != 1 {
				t.Errorf("state has %d pods, want only the consistent one: %v", len(m.st.entries), m.st.text)
			}
			if got := m.DefaultCPUSet().String(); got != "0-2" {
				t.Errorf("default = %s, want 0-2", got)
			}
			for _, c := range tc.ctrs[1:] {
				wantCPUs(t, m, string(c.pod.UID), c.name, "0-2", false)
			}
		})
	}
}

func TestRebuildWithCurrentCPUSetFunc(t *testing.T) {
	a, b := pod("a", true, "1"), pod("b", true, "1")
	// The runtime reports no cpusets (as a CRI without Status.Resources).
	rt := fakeWith(t, pinnedCtr{a, "c0", ""}, pinnedCtr{b, "c0", ""})
	ids := map[string]string{}
	ctrs, err := rt.ListContainers(t.Context(), &runtimeapi.ContainerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ctrs {
		ids[c.Id] = c.Labels[labelPodUID]
	}
	current := func(_ context.Context, id string) (string, error) {
		if ids[id] == "a" {
			return "2\n", nil
		}
		return "", errors.New("no cgroup")
	}
	m, _ := startRebuilt(t, rt, current, a, b)
	wantCPUs(t, m, "a", "c0", "2", true)
	wantCPUs(t, m, "b", "c0", "0-1,3", false)

	// Without the func, a runtime that reports no cpuset restores nothing.
	m2, _ := startRebuilt(t, rt, nil, a, b)
	if len(m2.st.entries) != 0 || m2.DefaultCPUSet().String() != "0-3" {
		t.Errorf("rebuilt from nothing: pool %s, %v", m2.DefaultCPUSet(), m2.st.text)
	}
}

func TestRebuildOnMissingCheckpointAndListError(t *testing.T) {
	a := pod("a", true, "2")
	rt := fakeWith(t, pinnedCtr{a, "c0", "1-2"})
	// No checkpoint while containers run: rebuilt too, nothing set aside.
	dir := t.TempDir()
	m, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 1, 1), NumReservedCPUs: 1, StateDir: dir, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), func() []*v1.Pod { return []*v1.Pod{a} }); err != nil {
		t.Fatal(err)
	}
	wantCPUs(t, m, "a", "c0", "1-2", true)
	if _, err := os.Stat(filepath.Join(dir, StateFileName+".corrupt")); err == nil {
		t.Error("a missing checkpoint was set aside")
	}
	// A runtime that fails to list gives the empty state, not an error.
	rt.InjectError("ListContainers", errors.New("down"), 1)
	m2, _ := startRebuilt(t, rt, nil, a)
	if len(m2.st.entries) != 0 || m2.DefaultCPUSet().String() != "0-3" {
		t.Errorf("after a list error: pool %s, %v", m2.DefaultCPUSet(), m2.st.text)
	}
	// A valid checkpoint is trusted as is: no rebuild (no cpuset is read);
	// one listing checks that its containers still run.
	rt.ResetCalls()
	again, err := New(Config{Policy: PolicyStatic, Topology: mustTopo(t, 1, 4, 1, 1), NumReservedCPUs: 1, StateDir: dir, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(t.Context(), func() []*v1.Pod { return []*v1.Pod{a} }); err != nil {
		t.Fatal(err)
	}
	wantCPUs(t, again, "a", "c0", "1-2", true)
	if n := rt.CountCalls("ContainerStatus"); n != 0 {
		t.Errorf("a valid checkpoint was rebuilt: %d container statuses read", n)
	}
	if n := rt.CountCalls("ListContainers"); n != 1 {
		t.Errorf("a valid checkpoint listed containers %d times, want 1", n)
	}
}

var _ Runtime = (*fake.Runtime)(nil)

// At agent start the managers start before any pod source has delivered:
// the rebuild then trusts the runtime alone, and admission of the returning
// pods keeps the restored CPUs.
func TestRebuildBeforePodsAreKnown(t *testing.T) {
	a, b := pod("a", true, "1"), pod("b", true, "2")
	shared := pod("s", false, "1")
	rt := fakeWith(t, pinnedCtr{a, "c0", "1"}, pinnedCtr{b, "c0", "2-3"}, pinnedCtr{shared, "c0", "1-3"})
	m, _ := startRebuilt(t, rt, nil) // no active pods yet
	wantCPUs(t, m, "a", "c0", "1", true)
	wantCPUs(t, m, "b", "c0", "2-3", true)
	if got := m.DefaultCPUSet().String(); got != "0" {
		t.Errorf("default = %s, want 0", got)
	}
	if len(m.st.entries) != 2 {
		t.Errorf("the shared-pool container was restored: %v", m.st.text)
	}
	// The pods come back through admission: their CPUs stay.
	if err := m.AllocatePod(a); err != nil {
		t.Fatal(err)
	}
	if err := m.AllocatePod(b); err != nil {
		t.Fatal(err)
	}
	wantCPUs(t, m, "a", "c0", "1", true)
	wantCPUs(t, m, "b", "c0", "2-3", true)
}
