package cpumanager

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/containermgr/topology"
	"github.com/nodekit/nodekit/internal/checkpoint"
)

var errInjected = errors.New("injected fault")

// stepFS is the real file system whose n-th call (1-based, counting FS and
// File calls) fails. With dead set every call after it fails too, as if
// the process had died there.
type stepFS struct {
	checkpoint.OS
	mu      sync.Mutex
	n, fail int
	dead    bool
}

func (f *stepFS) step() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n == f.fail || (f.dead && f.fail > 0 && f.n > f.fail) {
		return errInjected
	}
	return nil
}

func (f *stepFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.OS.MkdirAll(dir, perm)
}

func (f *stepFS) CreateTemp(dir, pattern string) (checkpoint.File, error) {
	if err := f.step(); err != nil {
		return nil, err
	}
	file, err := f.OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &stepFile{File: file, fs: f}, nil
}

func (f *stepFS) ReadFile(p string) ([]byte, error) {
	if err := f.step(); err != nil {
		return nil, err
	}
	return f.OS.ReadFile(p)
}

func (f *stepFS) Rename(a, b string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.OS.Rename(a, b)
}

func (f *stepFS) Remove(p string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.OS.Remove(p)
}

func (f *stepFS) Lstat(p string) (fs.FileInfo, error) {
	if err := f.step(); err != nil {
		return nil, err
	}
	return f.OS.Lstat(p)
}

func (f *stepFS) SyncDir(dir string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.OS.SyncDir(dir)
}

func (f *stepFS) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

type stepFile struct {
	checkpoint.File
	fs *stepFS
}

func (f *stepFile) Write(b []byte) (int, error) {
	if err := f.fs.step(); err != nil {
		// Half the bytes reach the file, as in a torn write.
		n, _ := f.File.Write(b[:len(b)/2])
		return n, err
	}
	return f.File.Write(b)
}

func (f *stepFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *stepFile) Close() error {
	if err := f.fs.step(); err != nil {
		_ = f.File.Close()
		return err
	}
	return f.File.Close()
}

func mustTopo(t testing.TB, s, c, th, n int) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(s, c, th, n)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func newStatic(t testing.TB, topo *topology.Topology, reserved int, dir string) *Manager {
	t.Helper()
	m, err := New(Config{Policy: PolicyStatic, Topology: topo, NumReservedCPUs: reserved, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func started(t testing.TB, m *Manager) *Manager {
	t.Helper()
	if err := m.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return m
}

// pod builds a pod whose containers have the given cpu quantities ("" =
// no resources). guaranteed sets limits = requests (with memory).
func pod(uid string, guaranteed bool, cpus ...string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), "pod-"+uid, "default"
	for i, c := range cpus {
		ctr := v1.Container{Name: "c" + string(rune('0'+i))}
		if c != "" {
			req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(c), v1.ResourceMemory: resource.MustParse("100Mi")}
			ctr.Resources.Requests = req
			if guaranteed {
				ctr.Resources.Limits = req.DeepCopy()
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	return p
}

func withInit(p *v1.Pod, cpu string, restartable bool) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("100Mi")}
	c := v1.Container{Name: "init", Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}
	if restartable {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

func set(s string) cpuset.CPUSet {
	c, err := topology.ParseCPUSet(s)
	if err != nil {
		panic(err)
	}
	return c
}

// fakeCRI records UpdateContainerResources calls.
type fakeCRI struct {
	mu      sync.Mutex
	ctrs    []*runtimeapi.Container
	updates map[string]string
	calls   int
	listErr error
}

func (f *fakeCRI) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.Container
	for _, c := range f.ctrs {
		if filter.GetState() == nil || filter.GetState().GetState() == c.State {
			out = append(out, c)
		}
	}
	return out, nil
}

// ContainerStatus reports the cpuset last sent to the container, if any.
func (f *fakeCRI) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := &runtimeapi.ContainerStatus{Id: id}
	if cpus, ok := f.updates[id]; ok {
		st.Resources = &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: cpus}}
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

func (f *fakeCRI) UpdateContainerResources(_ context.Context, id string, r *runtimeapi.ContainerResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.updates == nil {
		f.updates = map[string]string{}
	}
	f.calls++
	f.updates[id] = r.GetLinux().GetCpusetCpus()
	return nil
}

func (f *fakeCRI) add(id, uid, name string, st runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctrs = append(f.ctrs, &runtimeapi.Container{Id: id, State: st, Labels: map[string]string{labelPodUID: uid, labelContainerName: name}})
}

func (f *fakeCRI) snapshot() (map[string]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.updates {
		out[k] = v
	}
	return out, f.calls
}

// nullFS accepts every write and keeps nothing.
type nullFS struct{ checkpoint.OS }

func (nullFS) MkdirAll(string, fs.FileMode) error { return nil }
func (nullFS) CreateTemp(string, string) (checkpoint.File, error) {
	return nullFile{}, nil
}
func (nullFS) Rename(string, string) error { return nil }
func (nullFS) SyncDir(string) error        { return nil }

type nullFile struct{}

func (nullFile) Write(b []byte) (int, error) { return len(b), nil }
func (nullFile) Sync() error                 { return nil }
func (nullFile) Close() error                { return nil }
func (nullFile) Name() string                { return "/dev/null/x" }

// Synthetic8 is the 8-cpu machine's cpu set, for the fuzz target.
func Synthetic8() (cpuset.CPUSet, error) { return cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), nil }
