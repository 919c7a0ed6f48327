package server

import (
	"net/http"
	"reflect"
	"testing"
)

// TestRequestAttributesTable holds the kubelet 1.36 mapping (its
// auth_test.go AuthzTestCases with fine-grained authorization on): every
// path with every method.
func TestRequestAttributesTable(t *testing.T) {
	paths := map[string][]string{
		"/attach/{podNamespace}/{podID}/{containerName}":       {"proxy"},
		"/attach/{podNamespace}/{podID}/{uid}/{containerName}": {"proxy"},
		"/checkpoint/{podNamespace}/{podID}/{containerName}":   {"checkpoint"},
		"/configz": {"configz", "proxy"},
		"/flagz":   {"configz"},
		"/statusz": {"statusz"},
		"/containerLogs/{podNamespace}/{podID}/{containerName}": {"proxy"},
		"/debug/flags/v":                                     {"proxy"},
		"/debug/pprof/{subpath:*}":                           {"proxy"},
		"/exec/{podNamespace}/{podID}/{containerName}":       {"proxy"},
		"/exec/{podNamespace}/{podID}/{uid}/{containerName}": {"proxy"},
		"/healthz":                            {"healthz", "proxy"},
		"/healthz/log":                        {"healthz", "proxy"},
		"/healthz/ping":                       {"healthz", "proxy"},
		"/healthz/syncloop":                   {"healthz", "proxy"},
		"/logs/":                              {"log"},
		"/logs/{logpath:*}":                   {"log"},
		"/metrics":                            {"metrics"},
		"/metrics/slis":                       {"metrics"},
		"/metrics/cadvisor":                   {"metrics"},
		"/metrics/probes":                     {"metrics"},
		"/metrics/resource":                   {"metrics"},
		"/pods/":                              {"pods", "proxy"},
		"/pods":                               {"pods", "proxy"},
		"/portForward/{podNamespace}/{podID}": {"proxy"},
		"/portForward/{podNamespace}/{podID}/{uid}":         {"proxy"},
		"/run/{podNamespace}/{podID}/{containerName}":       {"proxy"},
		"/run/{podNamespace}/{podID}/{uid}/{containerName}": {"proxy"},
		"/runningpods/":  {"pods", "proxy"},
		"/stats/":        {"stats"},
		"/stats/summary": {"stats"},
		// Not below a known prefix, only sharing its letters.
		"/podsx":    {"proxy"},
		"/metricsx": {"proxy"},
	}
	verbs := map[string]string{"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "HEAD": ""}
	u := &User{Name: "phibby"}
	for path, subs := range paths {
		for method, verb := range verbs {
			r, err := http.NewRequest(method, "https://localhost:1234"+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := RequestAttributes("test", u, r)
			var want []Attributes
			for _, s := range subs {
				want = append(want, Attributes{User: u, Verb: verb, APIVersion: "v1", Resource: "nodes",
					Subresource: s, Name: "test", ResourceRequest: true, Path: path})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", method, path, got, want)
			}
		}
	}
}

func TestIsSubpath(t *testing.T) {
	for _, c := range []struct {
		sub, path string
		want      bool
	}{
		{"/pods", "/pods", true}, {"/pods/", "/pods", true}, {"/pods/x", "/pods/", true},
		{"/podsx", "/pods", false}, {"/pod", "/pods", false}, {"/", "/pods", false},
	} {
		if got := isSubpath(c.sub, c.path); got != c.want {
			t.Errorf("isSubpath(%q, %q) = %v, want %v", c.sub, c.path, got, c.want)
		}
	}
}
