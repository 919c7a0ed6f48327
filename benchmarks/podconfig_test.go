package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	kconfig "k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	nktypes "github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

// Both pod configs are driven the way an agent drives them: each source
// sends its complete set into its channel, the merged updates are read
// from Updates(). Each send of a change is followed by reading the update
// it gives rise to, so the time includes the merge, the copies of the
// changed pods and the hand-offs between goroutines, on both sides.

var pcSources = []string{"file", "http", "api"}

// pcUpdate is a delivered update reduced to what both must agree on.
type pcUpdate struct {
	op     string
	source string
	pods   []string // uid/phase
}

func (u pcUpdate) String() string { return fmt.Sprintf("%s %s %v", u.op, u.source, u.pods) }

type pcDriver interface {
	send(source int, pods []*v1.Pod)
	recv() pcUpdate
	recvOp() string // the op only, no allocation for the record
	stop()
}

// nodekit

type nkPC struct {
	c      *podconfig.PodConfig
	chs    []chan<- nktypes.PodUpdate
	cancel context.CancelFunc
	done   chan struct{}
}

func newNKPC(sources []string) pcDriver {
	c, err := podconfig.New(podconfig.Config{Sources: sources})
	if err != nil {
		panic(err)
	}
	d := &nkPC{c: c, done: make(chan struct{})}
	for _, s := range sources {
		ch, err := c.Channel(s)
		if err != nil {
			panic(err)
		}
		d.chs = append(d.chs, ch)
	}
	var ctx context.Context
	ctx, d.cancel = context.WithCancel(context.Background())
	go func() { defer close(d.done); _ = c.Run(ctx) }()
	return d
}

func (d *nkPC) send(source int, pods []*v1.Pod) {
	d.chs[source] <- nktypes.PodUpdate{Op: nktypes.SET, Pods: pods, Source: pcSources[source]}
}

func (d *nkPC) recv() pcUpdate {
	u := <-d.c.Updates()
	out := pcUpdate{op: u.Op.String(), source: u.Source}
	for _, p := range u.Pods {
		out.pods = append(out.pods, string(p.UID)+"/"+string(p.Status.Phase))
	}
	return out
}

func (d *nkPC) recvOp() string { return (<-d.c.Updates()).Op.String() }

func (d *nkPC) stop() { d.cancel(); <-d.done }

// kubelet

type noSLI struct{}

func (noSLI) ObservedPodOnWatch(*v1.Pod, time.Time) {}

type kubeletPC struct {
	c      *kconfig.PodConfig
	sends  []func([]*v1.Pod)
	closes []func()
	cancel context.CancelFunc
}

func newKubeletPC(sources []string) pcDriver {
	rec := record.NewFakeRecorder(1 << 10)
	c := kconfig.NewPodConfig(rec, noSLI{})
	ctx, cancel := context.WithCancel(context.Background())
	d := &kubeletPC{c: c, cancel: cancel}
	for _, s := range sources {
		ch := c.Channel(ctx, s)
		// The channel's element type is unexported; a struct literal of
		// the same shape is assignable to it.
		d.sends = append(d.sends, func(pods []*v1.Pod) { ch <- struct{ Pods []*v1.Pod }{Pods: pods} })
		d.closes = append(d.closes, func() { close(ch) })
	}
	return d
}

func (d *kubeletPC) send(source int, pods []*v1.Pod) { d.sends[source](pods) }

func kubeletOp(op kubetypes.PodOperation) string {
	switch op {
	case kubetypes.ADD:
		return "ADD"
	case kubetypes.UPDATE:
		return "UPDATE"
	case kubetypes.REMOVE:
		return "REMOVE"
	case kubetypes.DELETE:
		return "DELETE"
	case kubetypes.RECONCILE:
		return "RECONCILE"
	}
	return fmt.Sprint(int(op))
}

func (d *kubeletPC) recv() pcUpdate {
	u := <-d.c.Updates()
	out := pcUpdate{op: kubeletOp(u.Op), source: u.Source}
	for _, p := range u.Pods {
		out.pods = append(out.pods, string(p.UID)+"/"+string(p.Status.Phase))
	}
	return out
}

func (d *kubeletPC) recvOp() string { return kubeletOp((<-d.c.Updates()).Op) }

// stop ends the source goroutines: the kubelet's listeners range over
// their channels, so the channels are closed after the context is done.
func (d *kubeletPC) stop() {
	d.cancel()
	for _, c := range d.closes {
		c()
	}
}

type pcImpl struct {
	name string
	new  func(sources []string) pcDriver
}

var pcImpls = []pcImpl{{"nodekit", newNKPC}, {"kubelet", newKubeletPC}}

// resyncSets returns the pods of one source as three independent sets
// with equal content (load, a, b). Distinct objects matter: the kubelet
// keeps the objects it was sent, and reflect.DeepEqual of an object with
// itself returns early. When statusFlip is set, b's first pod is Pending.
func resyncSets(n int, statusFlip bool) (load, a, b []*v1.Pod) {
	load, a, b = podSet(2, n), podSet(2, n), podSet(2, n)
	if statusFlip {
		b[0].Status.Phase = v1.PodPending
		b[0].ResourceVersion += "1" // a status write bumps it
	}
	return load, a, b
}

func splitSources(n int) [][]*v1.Pod {
	out := make([][]*v1.Pod, len(pcSources))
	for i := range n {
		out[i%3] = append(out[i%3], apiPod(i%3, i))
	}
	return out
}

// pcScenario records what an implementation delivers for: the initial
// load of n pods from three sources, an unchanged resync of the "api"
// source, a resync with one status change and one back, and a resync that
// removes a pod (the barrier that shows the unchanged resync sent
// nothing).
func pcScenario(impl pcImpl, n int) []pcUpdate {
	d := impl.new(pcSources)
	defer d.stop()
	var got []pcUpdate
	srcs := splitSources(n)
	for i, pods := range srcs {
		d.send(i, pods)
		got = append(got, d.recv())
	}
	api := len(pcSources) - 1
	same := splitSources(n)[api] // fresh objects, equal content
	d.send(api, same)            // unchanged: no update
	flip := make([]*v1.Pod, len(same))
	for i, p := range same {
		flip[i] = p.DeepCopy()
	}
	flip[0].Status.Phase = v1.PodPending
	flip[0].ResourceVersion += "1"
	d.send(api, flip)
	got = append(got, d.recv())
	back := make([]*v1.Pod, len(same))
	for i, p := range same {
		back[i] = p.DeepCopy()
	}
	d.send(api, back)
	got = append(got, d.recv())
	d.send(api, back[1:])
	got = append(got, d.recv())
	return got
}

func checkPodConfigSame(tb testing.TB, n int) {
	tb.Helper()
	nk := pcScenario(pcImpls[0], n)
	ku := pcScenario(pcImpls[1], n)
	if len(nk) != len(ku) {
		tb.Fatalf("podconfig n=%d: nodekit delivered %d updates, kubelet %d", n, len(nk), len(ku))
	}
	for i := range nk {
		a, b := nk[i], ku[i]
		slices.Sort(a.pods)
		slices.Sort(b.pods)
		if a.op != b.op || a.source != b.source || !slices.Equal(a.pods, b.pods) {
			tb.Fatalf("podconfig n=%d: update %d differs:\nnodekit %.300s\nkubelet %.300s", n, i, a, b)
		}
	}
}

func TestPodConfigSameUpdates(t *testing.T) {
	for _, n := range []int{110, 1000} {
		checkPodConfigSame(t, n)
	}
}

var pcSizes = []int{110, 1000, 10000}

// BenchmarkPodConfigInitialLoad: a fresh PodConfig takes n pods from three
// sources (a third each) and delivers the three ADDs.
func BenchmarkPodConfigInitialLoad(b *testing.B) {
	for _, n := range pcSizes {
		checkPodConfigSame(b, n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for _, impl := range pcImpls {
				b.Run(impl.name, func(b *testing.B) {
					srcs := splitSources(n)
					loop(b, func() {
						d := impl.new(pcSources)
						for i, pods := range srcs {
							d.send(i, pods)
							if op := d.recvOp(); op != "ADD" {
								b.Fatalf("got %s", op)
							}
						}
						d.stop()
					})
				})
			}
		})
	}
}

// BenchmarkPodConfigResyncUnchanged: the "api" source sends its n pods
// again, unchanged (fresh objects, as a relist or a re-read file gives).
// Nothing is delivered, so nothing says when a merge is done: the last of
// the b.N resyncs changes one status instead and its RECONCILE is awaited
// (inside the timed region), which, updates being merged in order, means
// every resync before it is finished.
func BenchmarkPodConfigResyncUnchanged(b *testing.B) {
	for _, n := range pcSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for _, impl := range pcImpls {
				b.Run(impl.name, func(b *testing.B) {
					load, a, c := resyncSets(n, false)
					_, _, flip := resyncSets(n, true)
					d := impl.new(pcSources[2:])
					defer d.stop()
					d.send(0, load)
					d.recvOp()
					sets := [][]*v1.Pod{a, c}
					b.ReportAllocs()
					b.ResetTimer()
					c0 := cpuNow()
					for i := range b.N {
						if i < b.N-1 {
							d.send(0, sets[i&1])
							continue
						}
						d.send(0, flip)
						if op := d.recvOp(); op != "RECONCILE" {
							b.Fatalf("last resync: got %s", op)
						}
					}
					b.StopTimer()
					reportCPU(b, c0)
				})
			}
		})
	}
}

// BenchmarkPodConfigResyncOneStatus: the "api" source sends its n pods
// again with one pod's phase flipped; one RECONCILE of one pod results.
func BenchmarkPodConfigResyncOneStatus(b *testing.B) {
	for _, n := range pcSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for _, impl := range pcImpls {
				b.Run(impl.name, func(b *testing.B) {
					load, running, pending := resyncSets(n, true)
					d := impl.new(pcSources[2:])
					defer d.stop()
					d.send(0, load)
					d.recvOp()
					sets := [][]*v1.Pod{pending, running}
					k := 0
					loop(b, func() {
						d.send(0, sets[k&1])
						k++
						if op := d.recvOp(); op != "RECONCILE" {
							b.Fatalf("got %s", op)
						}
					})
				})
			}
		})
	}
}
