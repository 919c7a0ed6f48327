// Command kube-apiserver builds the upstream API server for nodekit's e2e tests.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	//nodekit:allow kubernetes this separate module only builds the upstream API server for e2e tests
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
