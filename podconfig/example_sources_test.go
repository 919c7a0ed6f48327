package podconfig_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

// A file source and an HTTP source feed one PodConfig. The consumer sees
// each source's pods arrive, and knows when every source has delivered.
func Example_fileAndHTTP() {
	dir, _ := os.MkdirTemp("", "manifests")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(`apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: busybox:1.36
`), 0o644)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"metrics","namespace":"ops"},
			"spec":{"containers":[{"name":"exporter","image":"busybox:1.36"}]}}`)
	}))
	defer srv.Close()

	cfg, _ := podconfig.New(podconfig.Config{Sources: []string{kubetypes.SourceFile, kubetypes.SourceHTTP}})
	fileCh, _ := cfg.Channel(kubetypes.SourceFile)
	httpCh, _ := cfg.Channel(kubetypes.SourceHTTP)
	files, _ := podconfig.NewFileSource(podconfig.FileSourceConfig{Path: dir, NodeName: "node1", Out: fileCh})
	web, _ := podconfig.NewHTTPSource(podconfig.HTTPSourceConfig{URL: srv.URL, NodeName: "node1", Out: httpCh})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cfg.Run(ctx) }()

	show := func() {
		u := <-cfg.Updates()
		fmt.Print(u.Op, " from ", u.Source, ":")
		for _, p := range u.Pods {
			fmt.Print(" ", p.Namespace, "/", p.Name)
		}
		fmt.Println()
	}

	_ = files.Sync(ctx)
	show()
	fmt.Println("all sources seen:", cfg.SeenAllSources())
	_ = web.Sync(ctx)
	show()
	fmt.Println("all sources seen:", cfg.SeenAllSources())
	fmt.Println("pods:", len(cfg.MergedState()))

	cancel()
	<-done
	// Output:
	// ADD from file: default/web-node1
	// all sources seen: false
	// ADD from http: ops/metrics-node1
	// all sources seen: true
	// pods: 2
}
