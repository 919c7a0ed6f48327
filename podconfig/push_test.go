package podconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
)

func newTestPush(t *testing.T, cfg PushConfig) (*PushHandler, chan kubetypes.PodUpdate) {
	t.Helper()
	out := make(chan kubetypes.PodUpdate, 10)
	if cfg.Out == nil {
		cfg.Out = out
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "Node1"
	}
	h, err := NewPushHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

func doPush(h http.Handler, method, target, contentType, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func podNames(pods []*v1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return strings.Join(names, ",")
}

func TestPushAddListDelete(t *testing.T) {
	h, out := newTestPush(t, PushConfig{})

	rec := doPush(h, http.MethodPost, "/", "application/json", testPodJSON)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST = %d %s", rec.Code, rec.Body)
	}
	var resp v1.PodList
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Items) != 1 || resp.Items[0].Name != "web-node1" {
		t.Fatalf("POST response = %s (%v)", rec.Body, err)
	}
	u := recvUpdate(t, out)
	if u.Op != kubetypes.SET || u.Source != kubetypes.SourcePush || podNames(u.Pods) != "default/web-node1" {
		t.Fatalf("update = %v/%s %s", u.Op, u.Source, podNames(u.Pods))
	}
	if u.Pods[0].UID == "" || u.Pods[0].Spec.NodeName != "Node1" {
		t.Fatalf("pushed pod not defaulted: uid=%q node=%q", u.Pods[0].UID, u.Pods[0].Spec.NodeName)
	}
	firstUID := u.Pods[0].UID

	rec = doPush(h, http.MethodPut, "/", "application/yaml; charset=utf-8", testListYAML)
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	u = recvUpdate(t, out)
	if got := podNames(u.Pods); got != "default/b-node1,default/web-node1,ns1/a-node1" {
		t.Fatalf("SET after PodList = %s", got)
	}
	for _, p := range u.Pods {
		if p.Name == "web-node1" && p.UID != firstUID {
			t.Fatalf("untouched pod changed UID")
		}
	}

	rec = doPush(h, http.MethodGet, "/", "", "")
	var list v1.PodList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatalf("GET body %s: %v", rec.Body, err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || list.Kind != "PodList" || len(list.Items) != 3 {
		t.Fatalf("GET = %d %s", rec.Code, rec.Body)
	}
	expectNoUpdate(t, out)

	// DELETE by path with the stored name, by path with the pushed name,
	// by query with the default namespace.
	for _, c := range []struct{ target, left string }{
		{"/ns1/a-node1", "default/b-node1,default/web-node1"},
		{"/default/web", "default/b-node1"},
		{"/?name=b", ""},
	} {
		rec = doPush(h, http.MethodDelete, c.target, "", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("DELETE %s = %d %s", c.target, rec.Code, rec.Body)
		}
		u = recvUpdate(t, out)
		if u.Op != kubetypes.SET || u.Pods == nil || podNames(u.Pods) != c.left {
			t.Fatalf("after DELETE %s: %s", c.target, podNames(u.Pods))
		}
	}
	rec = doPush(h, http.MethodDelete, "/default/web", "", "")
	if rec.Code != http.StatusNotFound {
		t.Fatalf("DELETE unknown = %d", rec.Code)
	}
	expectNoUpdate(t, out)
}

func TestPushRejections(t *testing.T) {
	h, out := newTestPush(t, PushConfig{MaxBodyBytes: 200, MaxPods: 1})
	badCtr := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"_C_","image":"i"}]}}`
	dup := `{"apiVersion":"v1","kind":"PodList","items":[` + testPodJSON + `,` + testPodJSON + `]}`
	cases := []struct {
		name, method, target, ct, body string
		code                           int
		contains                       string
	}{
		{"method", http.MethodPatch, "/", "", "", http.StatusMethodNotAllowed, ""},
		{"too large", http.MethodPost, "/", "", testPodJSON + strings.Repeat(" ", 200), http.StatusRequestEntityTooLarge, "200"},
		{"invalid pod", http.MethodPost, "/", "application/json", badCtr, http.StatusBadRequest, "containers[0].name"},
		{"garbage", http.MethodPost, "/", "", "{{{", http.StatusBadRequest, "invalid manifest"},
		{"empty", http.MethodPost, "/", "", "", http.StatusBadRequest, "empty"},
		{"content type", http.MethodPost, "/", "text/html", testPodJSON, http.StatusUnsupportedMediaType, ""},
		{"bad content type", http.MethodPost, "/", "/;;", testPodJSON, http.StatusUnsupportedMediaType, ""},
		{"delete bad path", http.MethodDelete, "/a/b/c", "", "", http.StatusBadRequest, ""},
		{"delete no name", http.MethodDelete, "/?namespace=x", "", "", http.StatusBadRequest, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := doPush(h, c.method, c.target, c.ct, c.body)
			if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.contains) {
				t.Fatalf("= %d %q, want %d containing %q", rec.Code, rec.Body, c.code, c.contains)
			}
			if c.code == http.StatusMethodNotAllowed && !strings.Contains(rec.Header().Get("Allow"), "POST") {
				t.Fatalf("405 without Allow header")
			}
			expectNoUpdate(t, out)
		})
	}

	// Body over the cap without a Content-Length (chunked): still 413.
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("a", 300)))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversized body = %d", rec.Code)
	}

	// MaxPods 1: the first pod fits, a second one is refused.
	h2, out2 := newTestPush(t, PushConfig{})
	if rec := doPush(h2, http.MethodPost, "/", "", dup); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "twice") {
		t.Fatalf("duplicate pods = %d %s", rec.Code, rec.Body)
	}
	expectNoUpdate(t, out2)
	if rec := doPush(h, http.MethodPost, "/", "", testPodJSON); rec.Code != http.StatusOK {
		t.Fatalf("first pod = %d %s", rec.Code, rec.Body)
	}
	recvUpdate(t, out)
	other := strings.Replace(testPodJSON, `"web"`, `"web2"`, 1)
	if rec := doPush(h, http.MethodPost, "/", "", other); rec.Code != http.StatusConflict {
		t.Fatalf("over MaxPods = %d %s", rec.Code, rec.Body)
	}
	expectNoUpdate(t, out)
}

// TestPushClientGoneWhileOutFull: nobody reads Out, the client gives up,
// the handler answers 503 and its set is unchanged.
func TestPushClientGoneWhileOutFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := make(chan kubetypes.PodUpdate) // never read until the end
	h, _ := newTestPush(t, PushConfig{Out: out})
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(testPodJSON)).WithContext(ctx)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	cancel()
	<-done
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("= %d %s, want 503", rec.Code, rec.Body)
	}
	pods, err := h.Pods(t.Context())
	if err != nil || len(pods) != 0 {
		t.Fatalf("set changed after a failed delivery: %v %v", podNames(pods), err)
	}
	// The lock was released: a later request with a reader succeeds.
	got := make(chan kubetypes.PodUpdate, 1)
	go func() { got <- <-out }()
	if rec := doPush(h, http.MethodPost, "/", "", testPodJSON); rec.Code != http.StatusOK {
		t.Fatalf("after recovery = %d", rec.Code)
	}
	if u := <-got; len(u.Pods) != 1 {
		t.Fatalf("got %d pods", len(u.Pods))
	}
}

func TestPushSyncSendsCurrentSet(t *testing.T) {
	h, out := newTestPush(t, PushConfig{})
	if err := h.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u := recvUpdate(t, out); u.Op != kubetypes.SET || u.Pods == nil || len(u.Pods) != 0 {
		t.Fatalf("initial Sync = %v %v", u.Op, u.Pods)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	full, _ := newTestPush(t, PushConfig{Out: make(chan kubetypes.PodUpdate)})
	if err := full.Sync(ctx); err == nil {
		t.Fatal("Sync with a full Out and a done ctx returned nil")
	}
}

// TestPushConcurrent pushes from many clients at once over a real server;
// the SETs arrive in commit order, so the last one holds every pod.
func TestPushConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := make(chan kubetypes.PodUpdate)
	h, _ := newTestPush(t, PushConfig{Out: out})
	srv := httptest.NewServer(h)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 8
	var last kubetypes.PodUpdate
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for i := 0; i < n; i++ {
			last = <-out
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Replace(testPodJSON, `"web"`, fmt.Sprintf(`"web%d"`, i), 1)
			resp, err := client.Post(srv.URL, "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("POST %d = %d", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	<-readerDone
	srv.Close()
	if len(last.Pods) != n {
		t.Fatalf("last SET has %d pods, want %d", len(last.Pods), n)
	}
}

func TestNewPushHandlerConfigErrors(t *testing.T) {
	out := make(chan kubetypes.PodUpdate)
	for _, c := range []struct {
		cfg   PushConfig
		field string
	}{
		{PushConfig{Out: out}, "NodeName"},
		{PushConfig{NodeName: "n"}, "Out"},
		{PushConfig{NodeName: "n", Out: out, MaxBodyBytes: -1}, "MaxBodyBytes"},
		{PushConfig{NodeName: "n", Out: out, MaxBodyBytes: MaxManifestSize + 1}, "MaxBodyBytes"},
		{PushConfig{NodeName: "n", Out: out, MaxPods: -1}, "MaxPods"},
	} {
		if _, err := NewPushHandler(c.cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err = %v, want one naming %s", c.cfg, err, c.field)
		}
	}
}

func TestPushRunIsASource(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := make(chan kubetypes.PodUpdate) // unbuffered: Run's first send is seen
	h, _ := newTestPush(t, PushConfig{Out: out})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	u := <-out
	if u.Op != kubetypes.SET || u.Source != kubetypes.SourcePush || len(u.Pods) != 0 {
		t.Fatalf("first update = %v %q %d pods, want an empty SET from %q", u.Op, u.Source, len(u.Pods), kubetypes.SourcePush)
	}
	// A push while Run runs is sent as a SET with the pod.
	go func() { doPush(h, http.MethodPost, "/", "application/json", testPodJSON) }()
	if u := <-out; len(u.Pods) != 1 || u.Pods[0].Name != "web-node1" {
		t.Fatalf("after a push got %s, want web-node1", podNames(u.Pods))
	}
	if err := h.Run(ctx); err != ErrAlreadyRan {
		t.Fatalf("second Run = %v, want ErrAlreadyRan", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}
