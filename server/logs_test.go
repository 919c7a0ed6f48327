package server

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestContainerLogsParameters(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		query string
		want  v1.PodLogOptions
	}{
		{"", v1.PodLogOptions{}},
		{"follow=true", v1.PodLogOptions{Follow: true}},
		{"follow=1&previous=yes&timestamps=true", v1.PodLogOptions{Follow: true, Previous: true, Timestamps: true}},
		{"follow=false&previous=0", v1.PodLogOptions{}},
		{"tailLines=10", v1.PodLogOptions{TailLines: ptr.To[int64](10)}},
		{"tail=7", v1.PodLogOptions{TailLines: ptr.To[int64](7)}},
		{"tail=all&tailLines=3", v1.PodLogOptions{}},
		{"limitBytes=100", v1.PodLogOptions{LimitBytes: ptr.To[int64](100)}},
		{"sinceSeconds=30", v1.PodLogOptions{SinceSeconds: ptr.To[int64](30)}},
		{"sinceTime=2026-11-26T10:00:00Z", v1.PodLogOptions{SinceTime: &since}},
		{"tailLines=0", v1.PodLogOptions{TailLines: ptr.To[int64](0)}},
		{"stream=All", v1.PodLogOptions{Stream: ptr.To(v1.LogStreamAll)}},
	} {
		f := newFixture(t, nil)
		w := f.do(t, "GET", "/containerLogs/default/web/app?"+c.query, "admin")
		wantCode(t, w, http.StatusOK)
		if w.Body.String() != "hello\nerr:hello\n" {
			t.Errorf("%q: body %q", c.query, w.Body.String())
		}
		if len(f.logs.calls) != 1 {
			t.Fatalf("%q: %d calls", c.query, len(f.logs.calls))
		}
		got := f.logs.calls[0]
		if got.pod.UID != testUID || got.container != "app" {
			t.Errorf("%q: pod %s container %s", c.query, got.pod.UID, got.container)
		}
		if got.opts.SinceTime != nil {
			got.opts.SinceTime = &metav1.Time{Time: got.opts.SinceTime.UTC()}
		}
		if !reflect.DeepEqual(*got.opts, c.want) {
			t.Errorf("%q: options %+v, want %+v", c.query, *got.opts, c.want)
		}
	}
	// Init containers have logs too.
	f := newFixture(t, nil)
	wantCode(t, f.do(t, "GET", "/containerLogs/default/web/init", "admin"), http.StatusOK)
}

func TestContainerLogsRefusals(t *testing.T) {
	for _, c := range []struct {
		target string
		code   int
	}{
		// Parameters that do not decode: 400.
		{"/containerLogs/default/web/app?tailLines=abc", http.StatusBadRequest},
		{"/containerLogs/default/web/app?limitBytes=1e3", http.StatusBadRequest},
		{"/containerLogs/default/web/app?sinceSeconds=x", http.StatusBadRequest},
		{"/containerLogs/default/web/app?sinceTime=yesterday", http.StatusBadRequest},
		// Invalid values: 422, as the kubelet.
		{"/containerLogs/default/web/app?tailLines=-1", http.StatusUnprocessableEntity},
		{"/containerLogs/default/web/app?limitBytes=0", http.StatusUnprocessableEntity},
		{"/containerLogs/default/web/app?sinceSeconds=0", http.StatusUnprocessableEntity},
		{"/containerLogs/default/web/app?sinceSeconds=5&sinceTime=2026-11-26T10:00:00Z", http.StatusUnprocessableEntity},
		{"/containerLogs/default/web/app?stream=Both", http.StatusUnprocessableEntity},
		{"/containerLogs/default/web/app?stream=Stdout&tailLines=1", http.StatusUnprocessableEntity},
		// Split streams are off in kubelet 1.36.
		{"/containerLogs/default/web/app?stream=Stdout", http.StatusBadRequest},
		// Names that are not names: 400 before any look-up.
		{"/containerLogs/default/web/..%2f..%2fetc", http.StatusBadRequest},
		{"/containerLogs/default/..%2fweb/app", http.StatusBadRequest},
		{"/containerLogs/Default/web/app", http.StatusBadRequest},
		{"/containerLogs/default/web/a.b", http.StatusBadRequest},
		// Unknown pod or container: 404.
		{"/containerLogs/default/nope/app", http.StatusNotFound},
		{"/containerLogs/other/web/app", http.StatusNotFound},
		{"/containerLogs/default/web/nope", http.StatusNotFound},
	} {
		f := newFixture(t, nil)
		w := f.do(t, "GET", c.target, "admin")
		if w.Code != c.code {
			t.Errorf("%s: status %d, want %d (%q)", c.target, w.Code, c.code, w.Body.String())
		}
		if len(f.logs.calls) != 0 {
			t.Errorf("%s: logs read despite the refusal", c.target)
		}
	}
}

func TestContainerLogsErrors(t *testing.T) {
	// Failing before anything is written: 400 with the reason.
	f := newFixture(t, nil)
	f.logs.out, f.logs.err = "", errors.New("previous terminated container \"app\" not found")
	w := f.do(t, "GET", "/containerLogs/default/web/app?previous=true", "admin")
	wantCode(t, w, http.StatusBadRequest)
	// Failing after output: the output stands.
	f = newFixture(t, nil)
	f.logs.err = errors.New("rotated away")
	w = f.do(t, "GET", "/containerLogs/default/web/app", "admin")
	wantCode(t, w, http.StatusOK)
	if w.Body.String() != "hello\nerr:hello\n" {
		t.Errorf("body %q", w.Body.String())
	}
	g := newFixture(t, func(c *Config) { c.Logs = nil })
	wantCode(t, g.do(t, "GET", "/containerLogs/default/web/app", "admin"), http.StatusNotImplemented)
	// containerLogs is the proxy subresource (not log).
	g = newFixture(t, nil)
	g.authz.grants["logger/log"] = true
	wantCode(t, g.do(t, "GET", "/containerLogs/default/web/app", "logger"), http.StatusForbidden)
}
