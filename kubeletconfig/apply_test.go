package kubeletconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
)

func pod(name string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default"},
"spec":{"containers":[{"name":"c","image":"busybox:1","command":["sleep","3600"]}]}}`, name)
}

// runAgent runs a built agent until the test ends.
func runAgent(t *testing.T, a *nodekit.Agent) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wait, stop := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(stop)
	return wait
}

// An agent built from a configuration runs the static pods of its
// staticPodPath, refuses pods over maxPods with the kubelet's OutOfpods,
// and warns once about the fields it does not support.
func TestApplyRunsTheConfiguration(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(manifests, n+".json"), []byte(pod(n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := loaded(t, fmt.Sprintf("staticPodPath: %s\npodLogsDir: %s\nmaxPods: 2\nsyncFrequency: 30s\nprotectKernelDefaults: true\nregistryBurst: 3\n",
		manifests, filepath.Join(dir, "logs")))
	core, logs := observer.New(zapcore.WarnLevel)
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").WithRootDir(filepath.Join(dir, "root")).
		WithLogger(zap.NewNop())
	applied, err := Apply(b, c, Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(applied.Unsupported, ","); got != "protectKernelDefaults,registryBurst" {
		t.Errorf("unsupported %q", got)
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
	if f := logs.All()[0].ContextMap()["fields"]; fmt.Sprint(f) != "[protectKernelDefaults registryBurst]" {
		t.Errorf("the warning names %v", f)
	}
	a, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := runAgent(t, a)
	running, rejected := 0, 0
	for _, n := range []string{"a", "b", "c"} {
		_, st, err := a.WaitForPod(ctx, "default", n+"-node1", func(_ *v1.Pod, s v1.PodStatus) bool {
			return s.Phase == v1.PodRunning || s.Phase == v1.PodFailed
		})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Phase == v1.PodRunning:
			running++
		case st.Reason == "OutOfpods" && strings.Contains(st.Message, "used: 2, capacity: 2"):
			rejected++
		default:
			t.Errorf("pod %s: %s %s %s", n, st.Phase, st.Reason, st.Message)
		}
	}
	if running != 2 || rejected != 1 {
		t.Errorf("%d running, %d rejected; want 2 and 1 (maxPods 2)", running, rejected)
	}
	cz, err := applied.Configz()
	if err != nil || cz.(*kc.KubeletConfiguration).MaxPods != 2 {
		t.Errorf("configz %v %v", cz, err)
	}
}

// podsPerCore lowers the limit below maxPods on a small machine.
func TestMaxPodsAdmitterPodsPerCore(t *testing.T) {
	c := loaded(t, "maxPods: 100\npodsPerCore: 3\n")
	h := maxPodsAdmitter(c, 2)
	active := make([]*v1.Pod, 5)
	if r := h.Admit(&v1.Pod{}, active); !r.Admit {
		t.Errorf("6th pod refused with a limit of 6: %+v", r)
	}
	active = append(active, &v1.Pod{})
	if r := h.Admit(&v1.Pod{}, active); r.Admit || r.Message != "Node didn't have enough resource: pods, requested: 1, used: 6, capacity: 6" {
		t.Errorf("7th pod: %+v", r)
	}
}

func TestApplyErrors(t *testing.T) {
	newB := func() *nodekit.Builder { return nodekit.NewBuilder() }
	// Validation: every problem, and nothing applied.
	_, err := Apply(newB(), loaded(t, "maxPods: -1\nport: 0\nnodeLeaseDurationSeconds: -4\n"), Options{})
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Errors) != 2 {
		t.Errorf("validation errors: %v", err)
	}
	// A value the agent cannot honour, and a part's error, at once.
	_, err = Apply(newB(), loaded(t, "imageServiceEndpoint: unix:///other.sock\n"), Options{Parts: []Part{{
		Name: "shutdown", Fields: []string{"shutdownGracePeriod"},
		Apply: func(*nodekit.Builder, *kc.KubeletConfiguration) error { return errors.New("no logind") },
	}}})
	if !errors.Is(err, ErrCannotHonour) || !strings.Contains(err.Error(), "imageServiceEndpoint") || !strings.Contains(err.Error(), "shutdown: no logind") {
		t.Errorf("cannot honour: %v", err)
	}
	if _, err := Apply(newB(), nil, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil config: %v", err)
	}
}

// A part's fields are supported and its Apply sees the validated
// configuration; without it they are warned about.
func TestApplyParts(t *testing.T) {
	c := loaded(t, "shutdownGracePeriod: 30s\nnodeStatusUpdateFrequency: 4s\n")
	a, err := Apply(nodekit.NewBuilder(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Unsupported, ","); got != "nodeStatusReportFrequency,nodeStatusUpdateFrequency,shutdownGracePeriod" {
		t.Errorf("unsupported without parts: %s", got)
	}
	var seen time.Duration
	a, err = Apply(nodekit.NewBuilder(), c, Options{Parts: []Part{
		{Name: "shutdown", Fields: FieldsOf(ShutdownFields),
			Apply: func(_ *nodekit.Builder, c *kc.KubeletConfiguration) error {
				seen = c.ShutdownGracePeriod.Duration
				return nil
			}},
		{Name: "cluster", Fields: FieldsOf("nodeStatusUpdateFrequency, nodeStatusReportFrequency")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Unsupported) != 0 || seen != 30*time.Second {
		t.Errorf("unsupported %v, the part saw %v", a.Unsupported, seen)
	}
}

func TestUnsupportedFeatureGates(t *testing.T) {
	if u := Unsupported(loaded(t, "featureGates: {NodeSwap: true}\n"), nil); len(u) != 0 {
		t.Errorf("a gate at its default: %v", u)
	}
	if u := Unsupported(loaded(t, "featureGates: {MemoryQoS: true}\n"), nil); strings.Join(u, ",") != "featureGates" {
		t.Errorf("a gate changed: %v", u)
	}
}

type blockingImages struct {
	mu      sync.Mutex
	running int32
	most    int32
	release chan struct{}
}

func (b *blockingImages) ImageStatus(context.Context, *runtimeapi.ImageSpec, bool) (*runtimeapi.ImageStatusResponse, error) {
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (b *blockingImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	n := atomic.AddInt32(&b.running, 1)
	b.mu.Lock()
	b.most = max(b.most, n)
	b.mu.Unlock()
	defer atomic.AddInt32(&b.running, -1)
	select {
	case <-b.release:
		return img.Image, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// The pull limiter lets n pulls run at once; a waiting pull gives up with
// its context.
func TestPullLimiter(t *testing.T) {
	for _, n := range []int{1, 3} {
		imgs := &blockingImages{release: make(chan struct{})}
		l := newPullLimiter(imgs, n)
		var wg sync.WaitGroup
		started := make(chan struct{}, 10)
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				_, _ = l.PullImage(t.Context(), &runtimeapi.ImageSpec{Image: "x"}, nil, nil)
			}()
		}
		for i := 0; i < 6; i++ {
			<-started
		}
		for i := 0; i < 6; i++ {
			imgs.release <- struct{}{}
		}
		wg.Wait()
		if imgs.most > int32(n) || imgs.most < 1 {
			t.Errorf("limit %d: %d pulls ran at once", n, imgs.most)
		}
	}
	l := newPullLimiter(&blockingImages{release: make(chan struct{})}, 1)
	l.sem <- struct{}{}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.PullImage(ctx, &runtimeapi.ImageSpec{Image: "x"}, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting pull after cancel: %v", err)
	}
}
