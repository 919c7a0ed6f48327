package pleg

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// stubRuntime serves GetPods from a settable list and GetPodStatus from
// settable statuses (or a status derived from the listed pod).
type stubRuntime struct {
	mu          sync.Mutex
	pods        []*kubetypes.Pod
	podsErr     error
	statuses    map[types.UID]*kubetypes.PodStatus
	statusErr   map[types.UID]error
	listCalls   int
	statusCalls map[types.UID]int
}

func newStub() *stubRuntime {
	return &stubRuntime{
		statuses:    map[types.UID]*kubetypes.PodStatus{},
		statusErr:   map[types.UID]error{},
		statusCalls: map[types.UID]int{},
	}
}

func (s *stubRuntime) setPods(pods ...*kubetypes.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = pods
}

func (s *stubRuntime) setStatus(uid types.UID, st *kubetypes.PodStatus, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == nil {
		delete(s.statuses, uid)
	} else {
		s.statuses[uid] = st
	}
	if err == nil {
		delete(s.statusErr, uid)
	} else {
		s.statusErr[uid] = err
	}
}

func (s *stubRuntime) calls(uid types.UID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusCalls[uid]
}

func (s *stubRuntime) lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listCalls
}

func (s *stubRuntime) GetPods(_ context.Context, all bool) ([]*kubetypes.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listCalls++
	if !all {
		panic("pleg must list all pods")
	}
	if s.podsErr != nil {
		return nil, s.podsErr
	}
	return s.pods, nil
}

func (s *stubRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubetypes.PodStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statusCalls[uid]++
	if err := s.statusErr[uid]; err != nil {
		return nil, err
	}
	if st, ok := s.statuses[uid]; ok {
		cp := *st
		return &cp, nil
	}
	st := &kubetypes.PodStatus{ID: uid, Name: name, Namespace: ns}
	for _, p := range s.pods {
		if p == nil || p.ID != uid {
			continue
		}
		for _, c := range p.Containers {
			if c == nil {
				continue
			}
			st.ContainerStatuses = append(st.ContainerStatuses, &kubetypes.ContainerStatus{ID: c.ID, Name: c.Name, State: c.State})
		}
		for _, sb := range p.Sandboxes {
			if sb == nil {
				continue
			}
			state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			if sb.State == kubetypes.ContainerStateRunning {
				state = runtimeapi.PodSandboxState_SANDBOX_READY
			}
			st.SandboxStatuses = append(st.SandboxStatuses, &runtimeapi.PodSandboxStatus{Id: sb.ID, State: state})
		}
	}
	return st, nil
}

func ctr(id string, state kubetypes.ContainerState) *kubetypes.Container {
	return &kubetypes.Container{ID: id, Name: "n-" + id, State: state}
}

func pod(uid string, containers ...*kubetypes.Container) *kubetypes.Pod {
	return &kubetypes.Pod{ID: types.UID(uid), Name: uid, Namespace: "ns", Containers: containers}
}

func withSandboxes(p *kubetypes.Pod, sbs ...*kubetypes.Container) *kubetypes.Pod {
	p.Sandboxes = sbs
	return p
}

type fixture struct {
	rt    *stubRuntime
	clock *clocktesting.FakeClock
	g     *GenericPLEG
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{rt: newStub(), clock: clocktesting.NewFakeClock(epoch)}
	cfg := Config{Runtime: f.rt, Clock: f.clock, ChannelCapacity: 100}
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	return f
}

func (f *fixture) relist(t *testing.T) {
	t.Helper()
	if err := f.g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// drain returns the queued events as sorted "uid/type/container" strings.
func drain(ch <-chan *kubetypes.PodLifecycleEvent) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			s := string(e.ID) + "/" + string(e.Type)
			if d, ok := e.Data.(string); ok {
				s += "/" + d
			}
			out = append(out, s)
		default:
			slices.Sort(out)
			return out
		}
	}
}

func expectEvents(t *testing.T, ch <-chan *kubetypes.PodLifecycleEvent, want ...string) {
	t.Helper()
	got := drain(ch)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got  %s\n want %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}
