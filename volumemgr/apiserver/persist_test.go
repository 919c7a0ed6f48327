package apiserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/volumemgr"
)

var (
	_ volumemgr.ObjectSource      = (*Persisted)(nil)
	_ volumemgr.TokenSource       = (*Persisted)(nil)
	_ kuberuntime.EnvSourceGetter = (*Persisted)(nil)
)

// offlineClient is a fake clientset whose reads fail like an unreachable
// API server while down is set.
type offlineClient struct {
	*fake.Clientset
	down  atomic.Bool
	calls atomic.Int64
}

func newOfflineClient(objs ...runtime.Object) *offlineClient {
	c := &offlineClient{Clientset: fake.NewClientset(objs...)}
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.calls.Add(1)
		if c.down.Load() {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	return c
}

func testObjects() []runtime.Object {
	return []runtime.Object{
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}, Data: map[string]string{"k": "v1"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"p": []byte("pw")}},
	}
}

func newPersisted(t *testing.T, client *offlineClient, dir string, clk *clocktesting.FakeClock, log *zap.Logger, pods func() []*v1.Pod) *Persisted {
	t.Helper()
	if log == nil {
		log = zap.NewNop()
	}
	p, err := NewPersisted(PersistConfig{Client: client, Dir: dir, Clock: clk, Logger: log, Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podUsing(ns, name string, secret, cm string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}},
		}},
	}
}

func TestPersistedRestartServesFromDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "objects")
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient(testObjects()...)
	p := newPersisted(t, client, dir, clk, nil, nil)
	if cm, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil || cm.Data["k"] != "v1" {
		t.Fatalf("ConfigMap online = %v, %v", cm, err)
	}
	if s, err := p.Secret(t.Context(), "ns", "sec"); err != nil || string(s.Data["p"]) != "pw" {
		t.Fatalf("Secret online = %v, %v", s, err)
	}

	// A reboot: a new instance, the API server unreachable.
	client.down.Store(true)
	core, logs := observer.New(zap.InfoLevel)
	p2 := newPersisted(t, client, dir, clk, zap.New(core), nil)
	cm, err := p2.ConfigMap(t.Context(), "ns", "cfg")
	if err != nil || cm.Data["k"] != "v1" || cm.Name != "cfg" || cm.Namespace != "ns" {
		t.Fatalf("ConfigMap offline = %v, %v", cm, err)
	}
	if len(cm.ManagedFields) != 0 {
		t.Errorf("managed fields stored: %v", cm.ManagedFields)
	}
	s, err := p2.Secret(t.Context(), "ns", "sec")
	if err != nil || string(s.Data["p"]) != "pw" {
		t.Fatalf("Secret offline = %v, %v", s, err)
	}
	if logs.FilterMessageSnippet("unreachable").Len() == 0 {
		t.Errorf("no log about serving from disk: %v", logs.All())
	}
	// Never read: the error of the API server.
	if _, err := p2.ConfigMap(t.Context(), "ns", "other"); err == nil || errors.Is(err, volumemgr.ErrObjectNotFound) {
		t.Errorf("unknown object offline = %v, want the API server's error", err)
	}
	stored, err := p2.Stored()
	if err != nil || strings.Join(stored, ",") != "configmap ns/cfg,secret ns/sec" {
		t.Errorf("Stored = %v, %v", stored, err)
	}
}

func TestPersistedModes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "objects")
	if err := os.MkdirAll(filepath.Join(dir, SecretsDir), 0o755); err != nil { // too wide: tightened
		t.Fatal(err)
	}
	p := newPersisted(t, newOfflineClient(testObjects()...), dir, clocktesting.NewFakeClock(time.Unix(0, 0)), nil, nil)
	if _, err := p.Secret(t.Context(), "ns", "sec"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		dir:                                         0o700 | os.ModeDir,
		filepath.Join(dir, SecretsDir):              0o700 | os.ModeDir,
		filepath.Join(dir, ConfigMapsDir):           0o700 | os.ModeDir,
		filepath.Join(dir, SecretsDir, "ns_sec"):    0o600,
		filepath.Join(dir, ConfigMapsDir, "ns_cfg"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	// The secret is checksummed: not stored as plain JSON.
	b, _ := os.ReadFile(filepath.Join(dir, SecretsDir, "ns_sec"))
	if !strings.HasPrefix(string(b), "NKC\x01") {
		t.Errorf("secret file has no checkpoint header: %q", b[:8])
	}
}

func TestPersistedCorruptSetAside(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient(append(testObjects(),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg2"}, Data: map[string]string{"k": "two"}})...)
	p := newPersisted(t, client, dir, clk, nil, nil)
	for _, n := range []string{"cfg", "cfg2"} {
		if _, err := p.ConfigMap(t.Context(), "ns", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Secret(t.Context(), "ns", "sec"); err != nil {
		t.Fatal(err)
	}
	// Flip a byte in one configMap's payload.
	path := filepath.Join(dir, ConfigMapsDir, "ns_cfg")
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	client.down.Store(true)
	core, logs := observer.New(zap.InfoLevel)
	p2 := newPersisted(t, client, dir, clk, zap.New(core), nil)
	stored, err := p2.Stored()
	if err != nil || strings.Join(stored, ",") != "configmap ns/cfg2,secret ns/sec" {
		t.Fatalf("Stored = %v, %v", stored, err)
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Errorf("corrupt copy not set aside: %v", err)
	}
	if cms, secs, err := p2.Inventory(); err != nil || cms != 1 || secs != 1 {
		t.Errorf("Inventory = %d configMaps, %d secrets, %v", cms, secs, err)
	}
	if logs.FilterMessage("configMaps and secrets stored on disk").Len() != 1 {
		t.Errorf("inventory not logged: %v", logs.All())
	}
	if logs.FilterMessageSnippet("corrupt copy on disk set aside").Len() != 1 {
		t.Errorf("logs: %v", logs.All())
	}
	if cm, err := p2.ConfigMap(t.Context(), "ns", "cfg2"); err != nil || cm.Data["k"] != "two" {
		t.Errorf("cfg2 = %v, %v", cm, err)
	}
	if _, err := p2.ConfigMap(t.Context(), "ns", "cfg"); err == nil {
		t.Error("the corrupt object was served")
	}
	// Back online: the set-aside object is fetched and stored again.
	client.down.Store(false)
	clk.Step(DefaultRetryAfter)
	if cm, err := p2.ConfigMap(t.Context(), "ns", "cfg"); err != nil || cm.Data["k"] != "v1" {
		t.Fatalf("cfg online = %v, %v", cm, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("cfg not stored again: %v", err)
	}
	// A file holding another object than its name says is set aside too.
	other, _ := os.ReadFile(filepath.Join(dir, ConfigMapsDir, "ns_cfg2"))
	if err := os.WriteFile(filepath.Join(dir, ConfigMapsDir, "ns_cfg3"), other, 0o600); err != nil {
		t.Fatal(err)
	}
	if stored, _ := p2.Stored(); strings.Join(stored, ",") != "configmap ns/cfg,configmap ns/cfg2,secret ns/sec" {
		t.Errorf("Stored with a misnamed file = %v", stored)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigMapsDir, "ns_cfg3.corrupt")); err != nil {
		t.Errorf("misnamed copy not set aside: %v", err)
	}
}

func TestPersistedAPIErrorsFallBack(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient(testObjects()...)
	var fail atomic.Pointer[error] // returned for configmaps when set
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		client.calls.Add(1) // this reactor runs before the counting one
		if err := fail.Load(); err != nil {
			return true, nil, *err
		}
		return false, nil, nil
	})
	p := newPersisted(t, client, dir, clk, nil, nil)
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name     string
		err      error
		fromDisk bool
	}{
		{"unavailable", apierrors.NewServiceUnavailable("starting"), true},
		{"timeout", apierrors.NewTimeoutError("slow", 1), true},
		{"too many requests", apierrors.NewTooManyRequests("busy", 1), true},
		{"internal", apierrors.NewInternalError(errors.New("etcd")), true},
		{"forbidden", apierrors.NewForbidden(gr, "cfg", errors.New("no path")), false},
	} {
		fail.Store(&tc.err)
		clk.Step(time.Hour) // past RetryAfter: ask the API server
		cm, err := p.ConfigMap(t.Context(), "ns", "cfg")
		if tc.fromDisk != (err == nil) {
			t.Errorf("%s: ConfigMap = %v, %v; want from disk %v", tc.name, cm, err, tc.fromDisk)
		}
		if err == nil && cm.Data["k"] != "v1" {
			t.Errorf("%s: data %v", tc.name, cm.Data)
		}
	}
	// While recently unreachable, the disk copy is served without a call.
	unavailable := error(apierrors.NewServiceUnavailable("x"))
	fail.Store(&unavailable)
	clk.Step(time.Hour)
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	before := client.calls.Load()
	clk.Step(DefaultRetryAfter / 2)
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	if client.calls.Load() != before {
		t.Error("the API server was asked within RetryAfter of a failure")
	}
	// A clock that jumps back before the failure ends the wait at once.
	clk.SetTime(time.Unix(0, 0))
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	if client.calls.Load() == before {
		t.Error("after a backward clock jump the API server was not asked")
	}
	// Refreshed when it is back.
	fail.Store(nil)
	clk.Step(time.Hour)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v2"}}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil || got.Data["k"] != "v2" {
		t.Fatalf("after update = %v, %v", got, err)
	}
	client.down.Store(true)
	clk.Step(time.Hour)
	p2 := newPersisted(t, client, dir, clk, nil, nil)
	if got, err := p2.ConfigMap(t.Context(), "ns", "cfg"); err != nil || got.Data["k"] != "v2" {
		t.Fatalf("disk copy after update = %v, %v", got, err)
	}
}

func TestPersistedDeletedAndUnused(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient(append(testObjects(),
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec2"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg2"}})...)
	var pods atomic.Value
	pods.Store([]*v1.Pod{podUsing("ns", "a", "sec", "cfg"), podUsing("ns", "b", "sec2", "cfg2")})
	p := newPersisted(t, client, dir, clk, nil, func() []*v1.Pod { return pods.Load().([]*v1.Pod) })
	for _, n := range []string{"sec", "sec2"} {
		if _, err := p.Secret(t.Context(), "ns", n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cfg", "cfg2"} {
		if _, err := p.ConfigMap(t.Context(), "ns", n); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted in the API server: a read removes the copy.
	if err := client.CoreV1().Secrets("ns").Delete(t.Context(), "sec", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Secret(t.Context(), "ns", "sec"); !errors.Is(err, volumemgr.ErrObjectNotFound) {
		t.Fatalf("deleted secret = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SecretsDir, "ns_sec")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("copy of a deleted secret: %v", err)
	}
	// Deleted while we were not looking: Sync removes it.
	if err := client.CoreV1().ConfigMaps("ns").Delete(t.Context(), "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pod b is gone: its objects are no longer needed.
	pods.Store([]*v1.Pod{podUsing("ns", "a", "sec", "cfg")})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stored, _ := p.Stored(); len(stored) != 0 {
		t.Errorf("after Sync: %v", stored)
	}
}

func TestPersistedSyncKeepsCopiesOffline(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient(testObjects()...)
	pod := podUsing("ns", "a", "sec", "cfg")
	ready := false
	p, err := NewPersisted(PersistConfig{Client: client, Dir: dir, Clock: clk,
		Pods: func() []*v1.Pod { return []*v1.Pod{pod} }, PodsReady: func() bool { return ready }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Secret(t.Context(), "ns", "sec"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ConfigMap(t.Context(), "ns", "cfg"); err != nil {
		t.Fatal(err)
	}
	client.down.Store(true)
	// Pods not known yet: nothing is pruned even though the pod list says
	// otherwise.
	pod = &v1.Pod{}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stored, _ := p.Stored(); len(stored) != 2 {
		t.Errorf("pruned before the pods were known: %v", stored)
	}
	// Known and still used, API server down: kept.
	ready, pod = true, podUsing("ns", "a", "sec", "cfg")
	clk.Step(time.Hour)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stored, _ := p.Stored(); len(stored) != 2 {
		t.Errorf("offline Sync removed copies: %v", stored)
	}
}

func TestPersistedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
		client := newOfflineClient(testObjects()...)
		p, err := NewPersisted(PersistConfig{Client: client, Dir: dir, Clock: clk, SyncPeriod: time.Minute,
			Pods: func() []*v1.Pod { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Secret(t.Context(), "ns", "sec"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait()
		if stored, _ := p.Stored(); len(stored) != 1 {
			t.Fatalf("before the first period: %v", stored)
		}
		clk.Step(time.Minute)
		synctest.Wait()
		if stored, _ := p.Stored(); len(stored) != 0 {
			t.Errorf("after a period with no pods: %v", stored)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestNewPersistedConfig(t *testing.T) {
	for _, cfg := range []PersistConfig{
		{Dir: "/x"},
		{Client: fake.NewClientset()},
		{Client: fake.NewClientset(), Dir: "/x", APITimeout: -1},
	} {
		if _, err := NewPersisted(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewPersisted(%+v) = %v", cfg, err)
		}
	}
}

func TestFileName(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct{ ns, name, want string }{
		{"ns", "cfg", "ns_cfg"},
		{"ns", "a.b-c", "ns_a.b-c"},
		{"ns", long, "h-"},
		{"n_s", "x", "h-"},
		{"ns", "x.corrupt", "h-"},
		{"", "x", "h-"},
	} {
		got := fileName(tc.ns, tc.name)
		if tc.want == "h-" {
			if !strings.HasPrefix(got, "h-") || len(got) != 66 {
				t.Errorf("fileName(%q, %q) = %q, want a hash", tc.ns, tc.name, got)
			}
		} else if got != tc.want {
			t.Errorf("fileName(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.want)
		}
	}
}

func TestPersistedTokens(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := newOfflineClient()
	var forbid atomic.Bool
	n := 0
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if client.down.Load() {
			return true, nil, errors.New("connection refused")
		}
		if forbid.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "default", errors.New("no"))
		}
		n++
		out := a.(k8stesting.CreateAction).GetObject().DeepCopyObject().(*authenticationv1.TokenRequest)
		out.Status.Token = "tok-" + strconv.Itoa(n)
		return true, out, nil
	})
	a, b := podUsing("ns", "a", "s", "c"), podUsing("ns", "b", "s", "c")
	var pods atomic.Value
	pods.Store([]*v1.Pod{a, b})
	p := newPersisted(t, client, dir, clk, nil, func() []*v1.Pod { return pods.Load().([]*v1.Pod) })
	for _, pod := range []*v1.Pod{a, b} {
		if _, err := p.ServiceAccountToken(t.Context(), pod, "", 3600); err != nil {
			t.Fatal(err)
		}
	}
	if tok, err := p.ServiceAccountToken(t.Context(), a, "", 3600); err != nil || tok != "tok-3" {
		t.Fatalf("online token = %q, %v (want a fresh one)", tok, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, TokensDir))
	if len(entries) != 2 {
		t.Fatalf("%d token files, want 2", len(entries))
	}
	for _, e := range entries {
		if fi, _ := e.Info(); fi.Mode() != 0o600 {
			t.Errorf("token file mode %v", fi.Mode())
		}
	}
	// Offline after a restart: the last token of each pod.
	client.down.Store(true)
	p2 := newPersisted(t, client, dir, clk, nil, func() []*v1.Pod { return pods.Load().([]*v1.Pod) })
	if tok, err := p2.ServiceAccountToken(t.Context(), a, "", 3600); err != nil || tok != "tok-3" {
		t.Fatalf("offline token of a = %q, %v", tok, err)
	}
	if tok, err := p2.ServiceAccountToken(t.Context(), b, "", 3600); err != nil || tok != "tok-2" {
		t.Fatalf("offline token of b = %q, %v", tok, err)
	}
	if _, err := p2.ServiceAccountToken(t.Context(), a, "vault", 3600); err == nil {
		t.Error("a token for another audience was served")
	}
	// Forbidden is not served from disk.
	client.down.Store(false)
	forbid.Store(true)
	clk.Step(time.Hour)
	if _, err := p2.ServiceAccountToken(t.Context(), a, "", 3600); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden: %v", err)
	}
	// Pod b is gone: its token goes with the next Sync.
	pods.Store([]*v1.Pod{a})
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, TokensDir)); len(entries) != 1 {
		t.Errorf("%d token files after b is gone, want 1", len(entries))
	}
}

// TestNewPersistedReportsEveryProblem: every bad field is named at once.
func TestNewPersistedReportsEveryProblem(t *testing.T) {
	_, err := NewPersisted(PersistConfig{SyncPeriod: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewPersisted = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Client", "Dir", "SyncPeriod"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewPersisted = %v: %s not named", err, name)
		}
	}
}
