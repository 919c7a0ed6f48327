// Command nodelifecycle-controller runs the upstream node lifecycle
// controller of kube-controller-manager v1.36.3 alone (and, beside it, the
// taint eviction controller that kube-controller-manager runs with it), for
// nodekit's cluster-mode e2e tests: a node whose lease is not renewed
// within --node-monitor-grace-period gets its Ready condition set to
// Unknown and the unreachable taints, and the pods of a tainted node are
// evicted once their tolerations run out, as in a real cluster.
// hack/kube-apiserver.sh builds it beside kube-apiserver (same module,
// hack/apiserver/go.mod, so it adds nothing to go.sum) and starts it with
// the admin kubeconfig. The directory name starts with "_" so the root
// module's ./... does not see it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/controller/nodelifecycle"
	"k8s.io/kubernetes/pkg/controller/tainteviction"
)

type options struct {
	kubeconfig    string
	monitorPeriod time.Duration
	grace         time.Duration
	startupGrace  time.Duration
	evictionQPS   float64
	taintEviction bool
	nodeSelector  string
	qps           float64
	burst         int
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of an identity that may read leases, pods, daemonsets and nodes and update nodes and pods (required)")
	// kube-controller-manager's defaults: 5s, 50s, 60s, 0.1.
	flag.DurationVar(&o.monitorPeriod, "node-monitor-period", 5*time.Second, "how often node health is checked")
	flag.DurationVar(&o.grace, "node-monitor-grace-period", 50*time.Second, "how long a node's lease may go unrenewed before the node is marked unhealthy (Ready Unknown)")
	flag.DurationVar(&o.startupGrace, "node-startup-grace-period", 60*time.Second, "how long a starting node may be unresponsive before it is marked unhealthy")
	flag.Float64Var(&o.evictionQPS, "node-eviction-rate", 0.1, "nodes per second whose pods are evicted (tainted) when their zone is healthy")
	flag.BoolVar(&o.taintEviction, "taint-eviction", true, "also run the taint eviction controller (pods leave NoExecute-tainted nodes)")
	flag.StringVar(&o.nodeSelector, "node-selector", "", "a label selector: both controllers see (and so taint, mark and evict from) only the Nodes it matches; empty: every Node")
	// kube-controller-manager's defaults (--kube-api-qps, --kube-api-burst).
	flag.Float64Var(&o.qps, "kube-api-qps", 20, "API requests per second (both controllers share one client)")
	flag.IntVar(&o.burst, "kube-api-burst", 30, "burst of --kube-api-qps")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "nodelifecycle-controller:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "nodelifecycle-controller (nodekit e2e)"
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := labels.Parse(o.nodeSelector); err != nil {
		return fmt.Errorf("--node-selector: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	// The Nodes come from their own informer, narrowed by --node-selector:
	// a Node the controllers never see is never tainted, and its pods are
	// never marked or evicted (both look a pod's node up in this lister). A
	// test sharing the API server with others' Nodes runs them this way.
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = o.nodeSelector }))
	nodes := nodeFactory.Core().V1().Nodes()
	nlc, err := nodelifecycle.NewNodeLifecycleController(ctx,
		factory.Coordination().V1().Leases(),
		factory.Core().V1().Pods(),
		nodes,
		factory.Apps().V1().DaemonSets(),
		client,
		o.monitorPeriod,
		o.startupGrace,
		o.grace,
		float32(o.evictionQPS),
		float32(o.evictionQPS)/10, // secondary rate, as kube-controller-manager's 0.01 beside 0.1
		50,                        // large cluster size threshold (kube-controller-manager's default)
		0.55,                      // unhealthy zone threshold (kube-controller-manager's default)
	)
	if err != nil {
		return err
	}
	var tec *tainteviction.Controller
	if o.taintEviction {
		tec, err = tainteviction.New(ctx, client, factory.Core().V1().Pods(), nodes, "taint-eviction-controller")
		if err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
	var wg sync.WaitGroup
	if tec != nil {
		wg.Go(func() { tec.Run(ctx) })
	}
	nlc.Run(ctx)
	wg.Wait()
	return nil
}
