package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/procmem"
)

// report is one periodic line of the simulator's output.
type report struct {
	Time          time.Time `json:"time"`
	Nodes         int       `json:"nodes"`
	AgentsRunning int       `json:"agentsRunning"`
	NodesReady    int       `json:"nodesReady"`
	NodesNotReady int       `json:"nodesNotReady"`
	Pods          int       `json:"pods"`
	PodsRunning   int       `json:"podsRunning"`
	APIRequests   float64   `json:"apiRequestsPerSecond"`
	// CPU is the process's CPU use over the interval, in cores.
	CPU      float64 `json:"cpuCores"`
	RSSBytes int64   `json:"rssBytes"`
}

func (r report) String() string {
	perNode := func(v float64) float64 {
		if r.AgentsRunning == 0 {
			return 0
		}
		return v / float64(r.AgentsRunning)
	}
	return fmt.Sprintf("%s nodes %d/%d Ready (%d NotReady, %d agents running) | pods %d/%d Running | API %.1f req/s | CPU %.1f%% of a core (%.2f mcore/node) | RSS %.1f MB (%.2f MB/node)",
		r.Time.UTC().Format("15:04:05"), r.NodesReady, r.Nodes, r.NodesNotReady, r.AgentsRunning,
		r.PodsRunning, r.Pods, r.APIRequests, r.CPU*100, perNode(r.CPU*1000),
		float64(r.RSSBytes)/1e6, perNode(float64(r.RSSBytes)/1e6))
}

// reporter measures the simulator: Nodes from one watch of the simulated
// Node objects, pods from the shared pod watch, requests from the client's
// count, CPU from getrusage and RSS from /proc/self/status.
type reporter struct {
	sim   *simulator
	nodes cache.Store

	mu       sync.Mutex
	last     report
	lastReqs int64
	lastCPU  time.Duration
	lastAt   time.Time
}

func newReporter(sim *simulator) *reporter {
	return &reporter{sim: sim}
}

// run watches the Node objects until ctx ends.
func (r *reporter) runNodeWatch(ctx context.Context) {
	client := r.sim.cfg.Clients.Shared()
	nodes := client.CoreV1().Nodes()
	// The client says whether it can stream the initial list (a fake
	// clientset can't).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, opts)
		},
	}, client)
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &v1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{}})
	r.mu.Lock()
	r.nodes = store
	r.mu.Unlock()
	ctrl.RunWithContext(ctx)
}

// measure takes a report now.
func (r *reporter) measure() report {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	rep := report{Time: now, Nodes: len(r.sim.order), AgentsRunning: r.sim.running()}
	if r.nodes != nil {
		for _, o := range r.nodes.List() {
			n := o.(*v1.Node)
			if _, ours := r.sim.nodes[n.Name]; !ours {
				continue
			}
			if nodeReady(n) {
				rep.NodesReady++
			} else {
				rep.NodesNotReady++
			}
		}
	}
	r.sim.shared.Each(func(node string, p *v1.Pod) {
		if _, ours := r.sim.nodes[node]; !ours {
			return
		}
		rep.Pods++
		if p.Status.Phase == v1.PodRunning {
			rep.PodsRunning++
		}
	})
	reqs := r.sim.cfg.Clients.Requests()
	cpu := processCPU()
	if !r.lastAt.IsZero() {
		secs := now.Sub(r.lastAt).Seconds()
		rep.APIRequests = float64(reqs-r.lastReqs) / secs
		rep.CPU = (cpu - r.lastCPU).Seconds() / secs
	}
	r.lastReqs, r.lastCPU, r.lastAt = reqs, cpu, now
	rep.RSSBytes = rss()
	r.last = rep
	return rep
}

// latest is the last report taken.
func (r *reporter) latest() report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// loop prints a report every interval until ctx ends.
func (r *reporter) loop(ctx context.Context, every time.Duration, out io.Writer) {
	r.measure()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintln(out, r.measure())
		}
	}
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// processCPU is the user and system CPU time of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the resident set size of the process (VmRSS, read by
// internal/procmem as the other memory measurements), 0 if unknown.
func rss() int64 {
	st, err := procmem.ReadSelf()
	if err != nil {
		return 0
	}
	return int64(st.RSS)
}
