package kuberuntime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests (internal and runtime_test) if a
// goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stubCRI is a tiny in-memory CRI that records calls, for unit tests.
type stubCRI struct {
	mu         sync.Mutex
	clock      *testclock.FakeClock
	seq        int
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
	ctrSandbox map[string]string
	images     map[string]bool
	calls      []string
	errs       map[string]error // method -> error to return
	hang       map[string]bool  // method -> block until ctx is done
	pullErrs   []error          // consumed per PullImage call
	execErr    error
	stops      map[string]int64 // container id -> grace given
	stopOrder  []string         // container names in StopContainer order
}

var writeMethods = map[string]bool{
	"RunPodSandbox": true, "StopPodSandbox": true, "RemovePodSandbox": true, "CreateContainer": true,
	"StartContainer": true, "StopContainer": true, "RemoveContainer": true, "PullImage": true, "ExecSync": true,
}

func newStubCRI(clk *testclock.FakeClock) *stubCRI {
	return &stubCRI{clock: clk, sandboxes: map[string]*runtimeapi.PodSandboxStatus{}, containers: map[string]*runtimeapi.ContainerStatus{},
		ctrSandbox: map[string]string{}, images: map[string]bool{}, errs: map[string]error{}, hang: map[string]bool{}, stops: map[string]int64{}}
}

func (s *stubCRI) enter(ctx context.Context, method string) error {
	s.mu.Lock()
	s.calls = append(s.calls, method)
	err, hang := s.errs[method], s.hang[method]
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return status.Error(codes.DeadlineExceeded, ctx.Err().Error())
	}
	return err
}

func (s *stubCRI) writeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if writeMethods[c] {
			out = append(out, c)
		}
	}
	return out
}

func (s *stubCRI) resetCalls() { s.mu.Lock(); s.calls = nil; s.mu.Unlock() }

func (s *stubCRI) nextID(p string) string { s.seq++; return fmt.Sprintf("%s%d", p, s.seq) }

func notFound(id string) error { return status.Errorf(codes.NotFound, "%s not found", id) }

func (s *stubCRI) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if err := s.enter(ctx, "RunPodSandbox"); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID("sb")
	s.sandboxes[id] = &runtimeapi.PodSandboxStatus{Id: id, Metadata: cfg.GetMetadata(), State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: s.clock.Now().UnixNano() + int64(s.seq), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.1.0." + fmt.Sprint(s.seq)}}
	return id, nil
}

func (s *stubCRI) StopPodSandbox(ctx context.Context, id string) error {
	if err := s.enter(ctx, "StopPodSandbox"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return notFound(id)
	}
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

func (s *stubCRI) RemovePodSandbox(ctx context.Context, id string) error {
	if err := s.enter(ctx, "RemovePodSandbox"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sandboxes, id)
	return nil
}

func (s *stubCRI) PodSandboxStatus(ctx context.Context, id string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := s.enter(ctx, "PodSandboxStatus"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil, notFound(id)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: sb}, nil
}

func matchLabels(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (s *stubCRI) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := s.enter(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, sb := range s.sandboxes {
		if f != nil && f.State != nil && f.State.State != sb.State {
			continue
		}
		if f != nil && !matchLabels(f.LabelSelector, sb.Labels) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: sb.Id, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt, Labels: sb.Labels, Annotations: sb.Annotations})
	}
	return out, nil
}

func (s *stubCRI) CreateContainer(ctx context.Context, sbID string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if err := s.enter(ctx, "CreateContainer"); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID("c")
	s.containers[id] = &runtimeapi.ContainerStatus{Id: id, Metadata: cfg.GetMetadata(), State: runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: s.clock.Now().UnixNano() + int64(s.seq), Image: cfg.GetImage(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations()}
	s.ctrSandbox[id] = sbID
	return id, nil
}

func (s *stubCRI) StartContainer(ctx context.Context, id string) error {
	if err := s.enter(ctx, "StartContainer"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok {
		return notFound(id)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = s.clock.Now().UnixNano()
	return nil
}

func (s *stubCRI) StopContainer(ctx context.Context, id string, timeout int64) error {
	if err := s.enter(ctx, "StopContainer"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok {
		return notFound(id)
	}
	s.stops[id] = timeout
	s.stopOrder = append(s.stopOrder, c.GetMetadata().GetName())
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = 137
	c.FinishedAt = s.clock.Now().UnixNano()
	return nil
}

func (s *stubCRI) RemoveContainer(ctx context.Context, id string) error {
	if err := s.enter(ctx, "RemoveContainer"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.containers, id)
	return nil
}

func (s *stubCRI) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := s.enter(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range s.containers {
		if f != nil && f.State != nil && f.State.State != c.State {
			continue
		}
		if f != nil && !matchLabels(f.LabelSelector, c.Labels) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.Id, PodSandboxId: s.ctrSandbox[c.Id], Metadata: c.Metadata, Image: c.Image,
			State: c.State, CreatedAt: c.CreatedAt, Labels: c.Labels, Annotations: c.Annotations})
	}
	return out, nil
}

func (s *stubCRI) ContainerStatus(ctx context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := s.enter(ctx, "ContainerStatus"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok {
		return nil, notFound(id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: c}, nil
}

func (s *stubCRI) ExecSync(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	if err := s.enter(ctx, "ExecSync"); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil, []byte("boom"), s.execErr
}

func (s *stubCRI) ImageStatus(ctx context.Context, img *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := s.enter(ctx, "ImageStatus"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images[img.Image] {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:" + img.Image}}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (s *stubCRI) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if err := s.enter(ctx, "PullImage"); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pullErrs) > 0 {
		err := s.pullErrs[0]
		s.pullErrs = s.pullErrs[1:]
		if err != nil {
			return "", err
		}
	}
	s.images[img.Image] = true
	return "sha256:" + img.Image, nil
}

// stubBuilder is a minimal spec -> CRI config translation for tests.
type stubBuilder struct {
	configErr error
	auths     []*runtimeapi.AuthConfig
}

func (b *stubBuilder) sandboxConfig(_ context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Labels:   podLabels(pod),
	}, nil
}

func (b *stubBuilder) runtimeHandler(context.Context, *v1.Pod) (string, error) { return "", nil }

func (b *stubBuilder) containerConfig(_ context.Context, in containerInput) (*runtimeapi.ContainerConfig, error) {
	if b.configErr != nil {
		return nil, b.configErr
	}
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: in.Container.Name, Attempt: uint32(in.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: in.ImageRef},
		Labels:      containerLabels(in.Pod, in.Container.Name, in.ContainerType),
		Annotations: containerAnnotations(in.Pod, in.Container, in.Hash, in.RestartCount),
	}, nil
}

func (b *stubBuilder) pullAuths(string, []v1.Secret) ([]*runtimeapi.AuthConfig, error) {
	return b.auths, nil
}

// stubProbes holds probe results per container id.
type stubProbes struct {
	liveness, startup map[string]kubetypes.ProbeResult
}

func (p *stubProbes) Liveness(id string) kubetypes.ProbeResult { return p.liveness[id] }
func (p *stubProbes) Startup(id string) kubetypes.ProbeResult  { return p.startup[id] }
