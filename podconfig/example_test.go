package podconfig_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

// A file source reading a manifest directory feeds one PodConfig; the
// consumer prints what it is told.
func Example() {
	dir, _ := os.MkdirTemp("", "manifests")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(`apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
`), 0o644)

	cfg, _ := podconfig.New(podconfig.Config{Sources: []string{kubetypes.SourceFile}})
	ch, _ := cfg.Channel(kubetypes.SourceFile)
	files, _ := podconfig.NewFileSource(podconfig.FileSourceConfig{Path: dir, NodeName: "node1", Out: ch})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cfg.Run(ctx) }()

	print := func() {
		u := <-cfg.Updates()
		fmt.Print(u.Op, " from ", u.Source, ":")
		for _, p := range u.Pods {
			fmt.Print(" ", p.Namespace, "/", p.Name, " (", p.Spec.Containers[0].ImagePullPolicy, ")")
		}
		fmt.Println()
	}

	_ = files.Sync(ctx) // first read
	print()
	fmt.Println("all sources seen:", cfg.SeenAllSources())

	_ = os.Remove(filepath.Join(dir, "web.yaml"))
	_ = files.Sync(ctx)
	print()

	cancel()
	<-done
	// Output:
	// ADD from file: default/web-node1 (IfNotPresent)
	// all sources seen: true
	// REMOVE from file: default/web-node1 (IfNotPresent)
}
