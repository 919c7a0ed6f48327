// Command endpointslice-controller runs the upstream EndpointSlice
// controller of kube-controller-manager v1.36.3 alone, for nodekit's
// cluster-mode e2e tests: Services get EndpointSlices from the pods the
// agent reports (their IPs, readiness and node), as in a real cluster.
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
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/controller/endpointslice"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of an identity that may read pods, services and nodes and write endpointslices (required)")
	workers := flag.Int("workers", 2, "services synced at once")
	batch := flag.Duration("batch-period", 0, "how long pod changes are batched before a sync (kube-controller-manager's default: 0)")
	flag.Parse()
	if err := run(*kubeconfig, *workers, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "endpointslice-controller:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, workers int, batch time.Duration) error {
	if kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "endpointslice-controller (nodekit e2e)"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := endpointslice.NewController(ctx,
		factory.Core().V1().Pods(),
		factory.Core().V1().Services(),
		factory.Core().V1().Nodes(),
		factory.Discovery().V1().EndpointSlices(),
		100, // maxEndpointsPerSlice, kube-controller-manager's default
		client,
		batch,
	)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	c.Run(ctx, workers)
	return nil
}
