package exconfig_test

import (
	"flag"
	"fmt"

	"github.com/nodekit/nodekit/examples/internal/exconfig"
)

func ExampleGiven() {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	manifests := fs.String("manifests", "", "")
	url := fs.String("manifest-url", "", "")
	_ = fs.Parse([]string{"--manifests", "/flag/dir"})
	// The file's values.
	staticPodPath, staticPodURL := "/file/dir", "http://file/pods"
	g := exconfig.GivenFlags(fs)
	g.String("manifests", manifests, &staticPodPath)
	g.String("manifest-url", url, &staticPodURL)
	fmt.Println(staticPodPath, *manifests, staticPodURL, *url)
	// Output: /flag/dir /flag/dir http://file/pods http://file/pods
}
