//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kubetypes"
)

// Shared pieces of the in-process tests: the agent's lifecycle, its root
// and manifest directories, the status sink, and the API server fixture.

// runAgent runs agent in a goroutine and returns stop, which cancels Run
// and ends the test (t.Fatal) unless Run returns nil within timeout. stop
// runs once: it is also registered as a cleanup, so that an agent is
// stopped (and checked) when its test ends early; a second call does
// nothing.
func runAgent(t *testing.T, agent *nodekit.Agent, timeout time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go agent.Run(ctx)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-agent.Done():
			case <-time.After(timeout):
				t.Fatalf("Run did not return within %v of the cancel", timeout)
			}
			if err := agent.Err(); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// agentDirs makes a root directory for an in-process agent and an empty
// manifest directory in it.
func agentDirs(t *testing.T) (root, manifests string) {
	t.Helper()
	root = t.TempDir()
	manifests = filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, manifests
}

// builder starts the Builder of an in-process agent: node nodeName on the
// test's containerd, with root as its root directory and, unless it is
// "", manifests as its manifest directory.
func (e *env) builder(root, manifests string) *nodekit.Builder {
	b := nodekit.NewBuilder().
		WithNodeName(nodeName).
		WithRuntimeEndpoint(e.endpoint).
		WithRootDir(root)
	if manifests != "" {
		b.WithManifestDir(manifests)
	}
	return b
}

// statusSink keeps the latest status of every pod by name.
type statusSink struct {
	mu sync.Mutex
	st map[string]v1.PodStatus
}

func newStatusSink() *statusSink { return &statusSink{st: map[string]v1.PodStatus{}} }

func (s *statusSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st[pod.Name] = *st.DeepCopy()
	return nil
}

// get is the pod's latest status (zero before the first).
func (s *statusSink) get(name string) v1.PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st[name]
}

// container is the status of one container of the pod, and the pod's.
func (s *statusSink) container(pod, name string) (v1.ContainerStatus, v1.PodStatus) {
	st := s.get(pod)
	for _, c := range st.ContainerStatuses {
		if c.Name == name {
			return c, st
		}
	}
	return v1.ContainerStatus{}, st
}

// running counts the pods whose latest phase is Running.
func (s *statusSink) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.st {
		if st.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}

// podSets is a pod source for WithPodSource(source, ...) that sends each
// pod set it receives on sets as the complete set (SET) of that source.
// The pods of kubetypes.SourceAPI are not static pods, which are never
// evicted.
func podSets(source string, sets <-chan []*v1.Pod) func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
	return func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
		return &setSource{out: out, sets: sets, source: source}, nil
	}
}

type setSource struct {
	out    chan<- kubetypes.PodUpdate
	sets   <-chan []*v1.Pod
	source string
}

func (s *setSource) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.sets:
			select {
			case s.out <- kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods, Source: s.source}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// requireCgroupV1 skips the test unless this host has cgroup v1 (or hybrid).
func requireCgroupV1(t *testing.T) {
	t.Helper()
	if mode, err := containermgr.DetectMode(v1Cgroups); err != nil || mode.Version() != containermgr.V1 {
		t.Skipf("this test needs a cgroup v1 or hybrid host: %v %v", mode, err)
	}
}

// cgroupManager removes the test pods left in containerd and makes a
// container manager with cfg under a pods cgroup of its own, prefix plus a
// random suffix (returned). At the end of the test the pods go first, then
// the whole cgroup tree; the test fails if that tree cannot be removed or,
// with checkGone, if any controller still has it.
func (e *env) cgroupManager(t *testing.T, prefix string, cfg containermgr.Config, checkGone bool) (*containermgr.Manager, string) {
	t.Helper()
	e.cleanup(t)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	top := prefix + hex.EncodeToString(rnd[:])
	cfg.PodsCgroup = top
	mgr, err := containermgr.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: the whole test tree goes.
	t.Cleanup(func() {
		if cgm := mgr.CgroupManager(); cgm != nil {
			if err := cgm.Destroy(containermgr.CgroupName{top}); err != nil {
				t.Errorf("removing the test cgroup tree: %v", err)
			}
		}
		if !checkGone {
			return
		}
		for _, c := range []string{"cpu", "memory", "pids", "cpuset", "unified", "systemd"} {
			if cgExists(c, top) {
				t.Errorf("%s/%s left behind", c, top)
			}
		}
	})
	t.Cleanup(func() { e.cleanup(t) })
	return mgr, top
}

// apiEnv is what the tests against a real kube-apiserver need, from the
// env files hack/kube-apiserver.sh and hack/containerd.sh write: the
// node's name, the node's and the admin's kubeconfig files and clients,
// and containerd.
type apiEnv struct {
	name, endpoint, busybox string
	nodeKC, adminKC         string
	node, admin             kubernetes.Interface
	cri                     *remote.Client
}

// newAPIClients skips the test unless NODEKIT_APISERVER_URL is set, and
// makes the clients; it leaves containerd alone (endpoint, busybox and
// cri unset).
func newAPIClients(t *testing.T) *apiEnv {
	t.Helper()
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start an API server with `bash hack/kube-apiserver.sh build && bash hack/kube-apiserver.sh start` and load its env (set -a; . /tmp/nodekit-apiserver/env; set +a)")
	}
	e := &apiEnv{name: os.Getenv("NODEKIT_NODE_NAME"),
		nodeKC: os.Getenv("NODEKIT_NODE_KUBECONFIG"), adminKC: os.Getenv("NODEKIT_ADMIN_KUBECONFIG")}
	if e.name == "" || e.nodeKC == "" || e.adminKC == "" {
		t.Fatal("NODEKIT_NODE_NAME, NODEKIT_NODE_KUBECONFIG and NODEKIT_ADMIN_KUBECONFIG must be set with NODEKIT_APISERVER_URL")
	}
	e.node, e.admin = nsClient(t, e.nodeKC), nsClient(t, e.adminKC)
	return e
}

// newAPIEnv is newAPIClients and a connection to containerd.
func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	e := newAPIClients(t)
	e.endpoint = os.Getenv("NODEKIT_CRI_ENDPOINT")
	if e.endpoint == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT is not set: start containerd with `NODEKIT_CONTAINERD_DIR=/tmp/nkc bash hack/containerd.sh start` and load its env with `set -a; . /tmp/nkc/env; set +a`")
	}
	e.busybox = getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	cri, err := remote.New(remote.Config{Endpoint: e.endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := cri.Connect(t.Context()); err != nil {
		t.Fatalf("containerd at %s: %v", e.endpoint, err)
	}
	t.Cleanup(func() { cri.Close(context.Background()) })
	e.cri = cri
	return e
}

// removePods deletes the named API pods and the sandboxes named name or
// name-* (a static pod's sandbox has the node's name appended), now
// (leftovers of an interrupted run) and when the test ends; it waits until
// the API server has none of the pods.
func (e *apiEnv) removePods(t *testing.T, names ...string) {
	t.Helper()
	clean := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range names {
			_ = e.admin.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		removeSandboxes(t, e.cri, func(m *runtimeapi.PodSandboxMetadata) bool {
			n := m.GetName()
			return slices.Contains(names, n) || slices.ContainsFunc(names, func(p string) bool { return strings.HasPrefix(n, p+"-") })
		})
	}
	clean()
	t.Cleanup(clean)
	for _, n := range names {
		nsPoll(t, 60*time.Second, "leftover pod "+n+" gone", func() (bool, string) {
			_, err := e.admin.CoreV1().Pods("default").Get(t.Context(), n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
}

// waitNodeReady polls until the node's Ready condition is True (with
// reason, unless it is "").
func waitNodeReady(t *testing.T, admin kubernetes.Interface, name string, timeout time.Duration, what, reason string) {
	t.Helper()
	nsPoll(t, timeout, what, func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue && (reason == "" || c.Reason == reason), string(c.Status) + " " + c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})
}

// boundPod is an API pod in namespace default bound to node, on the host's
// network with the host's DNS, without a service account token, with the
// grace period and the restart policy given ("" for the default).
func boundPod(name, node string, grace int64, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	no := false
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node, HostNetwork: true, DNSPolicy: v1.DNSDefault, RestartPolicy: policy,
			AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
			Containers: cs,
		},
	}
}

// sleeper is a container that sleeps until SIGTERM, which it obeys at once.
func sleeper(name, image string) v1.Container {
	return v1.Container{
		Name: name, Image: image, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
	}
}

// removeSandboxes stops and removes every sandbox in containerd whose
// metadata ours accepts; what fails is logged (it is for cleanups).
func removeSandboxes(t *testing.T, cri *remote.Client, ours func(*runtimeapi.PodSandboxMetadata) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := cri.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Logf("cleanup: ListPodSandbox: %v", err)
		return
	}
	for _, sb := range sbs {
		if !ours(sb.GetMetadata()) {
			continue
		}
		stopErr := cri.StopPodSandbox(ctx, sb.Id)
		if err := cri.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("cleanup: sandbox %s: stop: %v; remove: %v", sb.Id, stopErr, err)
		}
	}
}
