package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/server"
)

type pods []*v1.Pod

func (p pods) Pods() []*v1.Pod { return p }

// A server whose callers are all "admin", allowed everything: /pods lists
// the agent's pods; a request on the health handler needs no credentials.
func Example() {
	dir, _ := os.MkdirTemp("", "pki")
	defer os.RemoveAll(dir)
	pod := &v1.Pod{}
	pod.Namespace, pod.Name = "default", "web"
	srv, err := server.New(server.Config{
		NodeName: "node1",
		Pods:     pods{pod},
		Authenticator: server.AuthenticatorFunc(func(*http.Request) (*server.User, bool, error) {
			return &server.User{Name: "admin"}, true, nil
		}),
		Authorizer: server.AlwaysAllow{},
		CertDir:    dir,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/pods", nil))
	fmt.Println(w.Code, w.Body.Len() > 0)
	w = httptest.NewRecorder()
	srv.HealthzHandler().ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// 200 true
	// 200 ok
}
