package kuberuntime

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/nodekit/nodekit/kuberuntime/logs"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// specBuilder is the spec -> CRI config translation the Manager uses;
// *configBuilder satisfies it. Tests may substitute their own.
type specBuilder interface {
	sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error)
	runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error)
	containerConfig(ctx context.Context, in containerInput) (*runtimeapi.ContainerConfig, error)
	pullAuths(image string, secrets []v1.Secret) ([]*runtimeapi.AuthConfig, error)
}

// Manager turns desired pods into CRI calls. It is safe for concurrent use
// by several pod workers (each pod synced by one worker at a time).
type Manager struct {
	cfg     Config
	log     *zap.Logger
	rec     kubetypes.EventRecorder
	builder specBuilder

	crashBackoff *backoff
	imageBackoff *backoff
	reasons      reasonCache
	bufs         hashBuffers
	logReader    *logs.Reader
}

// New validates cfg, fills its defaults and returns a Manager. It does no I/O.
func New(cfg Config) (*Manager, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:          c,
		log:          c.Logger,
		rec:          kubetypes.RecorderOrNop(c.Recorder),
		crashBackoff: newBackoff(c.Clock, c.BackOffInitial, c.BackOffMax),
		imageBackoff: newBackoff(c.Clock, c.BackOffInitial, c.BackOffMax),
		reasons:      reasonCache{m: make(map[types.UID]map[string]waitingReason)},
	}
	if m.logReader, err = logs.NewReader(logs.ReaderConfig{Clock: c.Clock, Logger: c.Logger}); err != nil {
		return nil, err
	}
	m.builder = &configBuilder{
		cfg:                &m.cfg,
		envSources:         m.cfg.EnvSources,
		machineMemory:      m.cfg.MachineMemory,
		hostIPs:            m.cfg.HostIPs,
		seccompProfileRoot: m.cfg.SeccompProfileRoot,
		seccompDefault:     m.cfg.SeccompDefault,
	}
	return m, nil
}

// waitingReason is one entry of the reason cache.
type waitingReason struct{ reason, message string }

// reasonCache remembers why a container last failed to start (the kubelet's
// reasonCache), for the status manager.
type reasonCache struct {
	mu sync.Mutex
	m  map[types.UID]map[string]waitingReason
}

func (c *reasonCache) set(uid types.UID, name, reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.m[uid]
	if p == nil {
		p = make(map[string]waitingReason)
		c.m[uid] = p
	}
	p[name] = waitingReason{reason, message}
}

func (c *reasonCache) clear(uid types.UID, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.m[uid]; p != nil {
		delete(p, name)
		if len(p) == 0 {
			delete(c.m, uid)
		}
	}
}

func (c *reasonCache) get(uid types.UID, name string) (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[uid][name]
	return r.reason, r.message
}

func (c *reasonCache) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.m, uid)
	c.mu.Unlock()
}

// Reason returns the last waiting reason and message recorded for a
// container of a pod (CrashLoopBackOff, ErrImagePull, ImagePullBackOff,
// ErrImageNeverPull, ImageInspectError, CreateContainerConfigError,
// CreateContainerError, RunContainerError, PostStartHookError), or "" when
// the container's last start attempt succeeded or none failed.
func (m *Manager) Reason(uid types.UID, containerName string) (reason, message string) {
	return m.reasons.get(uid, containerName)
}

// ForgetPod drops what the Manager remembers about a pod (back-offs and
// waiting reasons). Call it when the pod is gone for good.
func (m *Manager) ForgetPod(uid types.UID) {
	m.reasons.forget(uid)
	prefix := string(uid) + "/"
	m.crashBackoff.forgetPrefix(prefix)
	m.imageBackoff.forgetPrefix(prefix)
}

// validatePod checks what the engine relies on; the error wraps
// ErrInvalidPod and names the field.
func validatePod(pod *v1.Pod) error {
	if pod == nil {
		return fmt.Errorf("%w: pod is nil", ErrInvalidPod)
	}
	if pod.UID == "" {
		return fmt.Errorf("%w: metadata.uid is empty", ErrInvalidPod)
	}
	if pod.Name == "" {
		return fmt.Errorf("%w: metadata.name is empty", ErrInvalidPod)
	}
	if len(pod.Spec.Containers) == 0 {
		return fmt.Errorf("%w: spec.containers is empty", ErrInvalidPod)
	}
	seen := make(map[string]string, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	check := func(field string, cs []v1.Container) error {
		for i := range cs {
			c := &cs[i]
			f := fmt.Sprintf("spec.%s[%d]", field, i)
			if c.Name == "" {
				return fmt.Errorf("%w: %s.name is empty", ErrInvalidPod, f)
			}
			if strings.ContainsAny(c.Name, "/\x00") || c.Name == "." || c.Name == ".." {
				return fmt.Errorf("%w: %s.name %q is not a valid name", ErrInvalidPod, f, c.Name)
			}
			if prev, dup := seen[c.Name]; dup {
				return fmt.Errorf("%w: %s.name %q duplicates %s", ErrInvalidPod, f, c.Name, prev)
			}
			seen[c.Name] = f
			if c.Image == "" {
				return fmt.Errorf("%w: %s.image is empty", ErrInvalidPod, f)
			}
		}
		return nil
	}
	if err := check("initContainers", pod.Spec.InitContainers); err != nil {
		return err
	}
	return check("containers", pod.Spec.Containers)
}

func podTarget(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return pod.Namespace + "/" + pod.Name
}
