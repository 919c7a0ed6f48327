// Command kube-scheduler is the upstream kube-scheduler v1.36.3
// (k8s.io/kubernetes/cmd/kube-scheduler), built unchanged for nodekit's
// e2e tests: pods without spec.nodeName are placed on the simulated nodes
// of examples/simulate by the real scheduler. hack/kube-apiserver.sh
// builds it beside kube-apiserver (same module, hack/apiserver/go.mod, so
// it adds nothing to go.sum) and writes its path to the env file; a test
// that needs it starts it with the admin kubeconfig for its own duration.
// The directory name starts with "_" so the root module's ./... does not
// see it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
