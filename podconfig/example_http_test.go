package podconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

func ExampleHTTPSource() {
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: nginx, image: nginx}]
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, manifest)
	}))
	defer srv.Close()

	out := make(chan kubetypes.PodUpdate, 1)
	src, err := podconfig.NewHTTPSource(podconfig.HTTPSourceConfig{
		URL:      srv.URL,
		Header:   http.Header{"Authorization": {"Bearer token"}},
		NodeName: "edge-1",
		Out:      out,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One synchronous fetch; Run(ctx) does this every Period.
	if err := src.Sync(ctx); err != nil {
		panic(err)
	}
	u := <-out
	fmt.Println(u.Op, u.Source, u.Pods[0].Namespace+"/"+u.Pods[0].Name, u.Pods[0].Spec.NodeName)

	// The same body again sends nothing.
	fmt.Println(src.Sync(ctx), len(out))

	// A pod server down for a moment: an error, nothing sent, and the
	// header value appears nowhere.
	srv.Close()
	err = src.Sync(ctx)
	fmt.Println(err != nil, len(out), bytes.Contains([]byte(err.Error()), []byte("token")), strings.HasPrefix(err.Error(), "podconfig: GET"))
	// Output:
	// SET http default/web-edge-1 edge-1
	// <nil> 0
	// true 0 false true
}

func ExamplePushHandler() {
	out := make(chan kubetypes.PodUpdate, 4)
	h, err := podconfig.NewPushHandler(podconfig.PushConfig{NodeName: "edge-1", Out: out})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/pods/", http.StripPrefix("/pods", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/pods/", "application/yaml", strings.NewReader(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: nginx, image: nginx}]
`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	u := <-out
	fmt.Println(resp.StatusCode, u.Op, u.Source, u.Pods[0].Name)

	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/pods/default/web", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	u = <-out
	fmt.Println(resp.StatusCode, u.Op, len(u.Pods))
	// Output:
	// 200 SET push web-edge-1
	// 200 SET 0
}
