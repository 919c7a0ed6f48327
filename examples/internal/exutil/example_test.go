package exutil_test

import (
	"os"

	"github.com/nodekit/nodekit/examples/internal/exutil"
)

func ExampleTable() {
	exutil.Table(os.Stdout, []exutil.Row{
		{Pod: "default/web", Source: "api", Phase: "Running", Ready: "1/1"},
		{Pod: "kube-system/static-web-node1", Source: "file", Phase: "Pending", Ready: "0/2"},
	})
	// Output:
	// POD                           SOURCE  PHASE    READY
	// default/web                   api     Running  1/1
	// kube-system/static-web-node1  file    Pending  0/2
}
