package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	kpleg "k8s.io/kubernetes/pkg/kubelet/pleg"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
)

// One fake runtime serves both PLEGs: a sequence of pre-built listings of
// the same pods and containers, in each side's types, so that listing
// costs nothing and the relist itself is measured. A listing is handed
// out by GetPods; the next GetPods hands out the next one.

const plegContainers = 3 // app containers per pod, plus one sandbox

type plegListing struct {
	nk []*kubetypes.Pod
	ku []*kubecontainer.Pod
}

// buildListing: n pods; exited(p, c) says whether container c of pod p
// is exited (else running).
func buildListing(n int, exited func(p, c int) bool) plegListing {
	var l plegListing
	for p := range n {
		uid := types.UID(fmt.Sprintf("pod-%d", p))
		name := fmt.Sprintf("pod-%d", p)
		sb := fmt.Sprintf("sb-%d", p)
		np := &kubetypes.Pod{ID: uid, Name: name, Namespace: "default",
			Sandboxes: []*kubetypes.Container{{ID: sb, State: kubetypes.ContainerStateRunning}}}
		kp := &kubecontainer.Pod{ID: uid, Name: name, Namespace: "default",
			Sandboxes: []*kubecontainer.Container{{ID: kubecontainer.ContainerID{Type: "containerd", ID: sb}, State: kubecontainer.ContainerStateRunning}}}
		for c := range plegContainers {
			id := fmt.Sprintf("c-%d-%d", p, c)
			cn := fmt.Sprintf("c%d", c)
			ns, ks := kubetypes.ContainerStateRunning, kubecontainer.ContainerStateRunning
			if exited(p, c) {
				ns, ks = kubetypes.ContainerStateExited, kubecontainer.ContainerStateExited
			}
			np.Containers = append(np.Containers, &kubetypes.Container{ID: id, Name: cn, State: ns})
			kp.Containers = append(kp.Containers, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "containerd", ID: id}, Name: cn, State: ks})
		}
		l.nk = append(l.nk, np)
		l.ku = append(l.ku, kp)
	}
	return l
}

type sharedFake struct {
	listings []plegListing
	n        int
}

func (f *sharedFake) next() plegListing {
	l := f.listings[f.n%len(f.listings)]
	f.n++
	return l
}

// nkRuntime is the fake as nodekit's pleg.Runtime.
type nkRuntime struct{ *sharedFake }

func (r nkRuntime) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) {
	return r.next().nk, nil
}
func (r nkRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
}

// kuRuntime is the fake as the kubelet's kubecontainer.Runtime (the
// kubelet's own FakeRuntime supplies the methods the PLEG does not call).
type kuRuntime struct {
	*containertest.FakeRuntime
	f *sharedFake
}

func (r kuRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	return r.f.next().ku, nil
}
func (r kuRuntime) GetPodStatus(_ context.Context, pod *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace}, nil
}

var plegEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// plegDriver relists once and returns the events sent, drained from the
// watch channel.
type plegDriver struct {
	relist func()
	drain  func() []string // "uid type data", unsorted
	count  func() int      // drain and count only
}

func newNKPLEG(f *sharedFake) plegDriver {
	g, err := pleg.New(pleg.Config{Runtime: nkRuntime{f}, Clock: clocktesting.NewFakeClock(plegEpoch), ChannelCapacity: 1 << 16})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	w := g.Watch()
	return plegDriver{
		relist: func() {
			if err := g.Relist(ctx); err != nil {
				panic(err)
			}
		},
		drain: func() (out []string) {
			for len(w) > 0 {
				e := <-w
				out = append(out, fmt.Sprintf("%s %s %v", e.ID, e.Type, e.Data))
			}
			return out
		},
		count: func() (n int) {
			for len(w) > 0 {
				<-w
				n++
			}
			return n
		},
	}
}

func newKubeletPLEG(f *sharedFake) plegDriver {
	ch := make(chan *kpleg.PodLifecycleEvent, 1<<16)
	gen := kpleg.NewGenericPLEG(logr.Discard(), kuRuntime{FakeRuntime: &containertest.FakeRuntime{}, f: f}, ch,
		&kpleg.RelistDuration{RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute},
		kubecontainer.NewCache(), clocktesting.NewFakeClock(plegEpoch))
	g := gen.(*kpleg.GenericPLEG)
	return plegDriver{
		relist: g.Relist,
		drain: func() (out []string) {
			for len(ch) > 0 {
				e := <-ch
				out = append(out, fmt.Sprintf("%s %s %v", e.ID, e.Type, e.Data))
			}
			return out
		},
		count: func() (n int) {
			for len(ch) > 0 {
				<-ch
				n++
			}
			return n
		},
	}
}

type plegImpl struct {
	name string
	new  func(*sharedFake) plegDriver
}

var plegImpls = []plegImpl{{"nodekit", newNKPLEG}, {"kubelet", newKubeletPLEG}}

// plegListings: the all-running listing, and when changed, a second one
// in which every tenth pod's first container has exited. Relists
// alternate between them, so 10% of the pods change on every relist.
func plegListings(n int, changed bool) []plegListing {
	ls := []plegListing{buildListing(n, func(int, int) bool { return false })}
	if changed {
		ls = append(ls, buildListing(n, func(p, c int) bool { return p%10 == 0 && c == 0 }))
	}
	return ls
}

// checkPLEGSame: from nothing, five relists over the listings; after each
// one both must have sent the same events (as sets: neither promises an
// order across pods).
func checkPLEGSame(tb testing.TB, n int, changed bool) {
	tb.Helper()
	var steps [2][][]string
	for i, impl := range plegImpls {
		f := &sharedFake{listings: plegListings(n, changed)}
		d := impl.new(f)
		for range 5 {
			d.relist()
			ev := d.drain()
			slices.Sort(ev)
			steps[i] = append(steps[i], ev)
		}
	}
	for s := range steps[0] {
		if !slices.Equal(steps[0][s], steps[1][s]) {
			tb.Fatalf("pleg n=%d changed=%v relist %d: nodekit sent %d events, kubelet %d:\nnodekit %.400v\nkubelet %.400v",
				n, changed, s, len(steps[0][s]), len(steps[1][s]), steps[0][s], steps[1][s])
		}
		if s > 0 && changed != (len(steps[0][s]) > 0) {
			tb.Fatalf("pleg n=%d changed=%v relist %d: %d events", n, changed, s, len(steps[0][s]))
		}
	}
}

func TestPLEGSameEvents(t *testing.T) {
	for _, n := range []int{110, 1000} {
		checkPLEGSame(t, n, false)
		checkPLEGSame(t, n, true)
	}
}

func benchPLEG(b *testing.B, changed bool) {
	for _, n := range []int{110, 1000} {
		checkPLEGSame(b, n, changed)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for _, impl := range plegImpls {
				b.Run(impl.name, func(b *testing.B) {
					f := &sharedFake{listings: plegListings(n, changed)}
					d := impl.new(f)
					// Warm up: the first relists create the records.
					for range 2 {
						d.relist()
					}
					d.count()
					want := 0
					if changed {
						want = n / 10
					}
					loop(b, func() {
						d.relist()
						if got := d.count(); got != want {
							b.Fatalf("%d events, want %d", got, want)
						}
					})
				})
			}
		})
	}
}

// BenchmarkPLEGRelistUnchanged: a relist of n pods (a sandbox and three
// containers each) in which nothing changed.
func BenchmarkPLEGRelistUnchanged(b *testing.B) { benchPLEG(b, false) }

// BenchmarkPLEGRelistChanged10: a relist in which a container of every
// tenth pod changed state (exited, then running again on the next).
func BenchmarkPLEGRelistChanged10(b *testing.B) { benchPLEG(b, true) }
