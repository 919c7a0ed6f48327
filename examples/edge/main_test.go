package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/nodeshutdown"
)

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "node.kubeconfig")
	if err := os.WriteFile(kc, []byte("clusters:\n- cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\nusers:\n- user:\n    token: secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(options{kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" || cfg.TLSClientConfig.CAFile != filepath.Join(dir, "ca.crt") || cfg.Timeout != 10*time.Second {
		t.Fatalf("config = %+v", cfg)
	}
	for _, o := range []options{{}, {server: "https://h:1"}, {kubeconfig: kc, token: "t"}} {
		if _, err := restConfig(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// apiServer is a fake clientset that can be taken offline: every call and
// watch then fails as if the API server were unreachable.
type apiServer struct {
	*fake.Clientset
	down atomic.Bool
}

func newAPIServer(objs ...runtime.Object) *apiServer {
	a := &apiServer{Clientset: fake.NewClientset(objs...)}
	unreachable := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	a.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if a.down.Load() {
			return true, nil, unreachable
		}
		return false, nil, nil
	})
	a.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		if a.down.Load() {
			return true, nil, unreachable
		}
		return false, nil, nil
	})
	return a
}

func edgePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{
			NodeName: "n1",
			Containers: []v1.Container{{Name: "c", Image: "busybox",
				VolumeMounts: []v1.VolumeMount{{Name: "creds", MountPath: "/creds"}},
				Env: []v1.EnvVar{{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "mode"}}}},
			}},
			Volumes: []v1.Volume{{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}}},
		},
	}
}

// startEdge builds and runs the agent; stop cancels it and waits.
func startEdge(t *testing.T, client *apiServer, state string) (*edge, func()) {
	t.Helper()
	e, err := build(options{nodeName: "n1", stateDir: state, images: "busybox", replayAfter: 500 * time.Millisecond, statusEvery: time.Second},
		client, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.agent.Run(ctx) }()
	return e, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func running(a *nodekit.Agent, uid string) bool {
	st, ok := a.StatusManager().GetPodStatus(types.UID(uid))
	return ok && st.Phase == v1.PodRunning
}

// containerOf is the ID of the running container of the named pod.
func containerOf(t *testing.T, a *nodekit.Agent, pod string) string {
	cs, err := a.FakeRuntime().ListContainers(t.Context(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.GetLabels()[kuberuntime.LabelPodName] == pod {
			return c.Id
		}
	}
	return ""
}

func runningContainers(t *testing.T, a *nodekit.Agent) int {
	cs, err := a.FakeRuntime().ListContainers(t.Context(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// TestRebootOffline: the agent runs a pod with a secret volume and a
// configMap env var, and a plain one; the agent stops (the fake runtime's containers die
// with it) and starts again on the same state dir with the API server
// unreachable: the pod runs again from the stored pod set and objects (a
// missing configMap would fail the container's creation). The API server
// comes back with the first pod deleted: it is stopped, the stored pod set
// and copies follow, and the plain pod keeps its container and gets its
// status (the one kept while offline) into the API server.
//
// It runs on the real clock, not in a synctest bubble: client-go's global
// error back-off (apimachinery's HandleError) compares a bubble's fake time
// with the real time of an earlier error and sleeps for decades.
func TestRebootOffline(t *testing.T) {
	poll := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, limit)
			}
			<-tick.C
		}
	}
	state := t.TempDir()
	api := newAPIServer(
		edgePod(),
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default", UID: "u2"},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"}, Data: map[string][]byte{"password": []byte("pw")}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"mode": "prod"}},
	)
	e, stop := startEdge(t, api, state)
	poll("pods running online", 10*time.Second, func() bool { return running(e.agent, "u1") && running(e.agent, "u2") })
	stop()
	for _, f := range []string{"checkpoints/podconfig-api.json", "objects/secrets/default_creds", "objects/configmaps/default_cfg"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Fatalf("not stored: %v", err)
		}
	}
	// The volume is written again from the stored copy.
	if err := os.RemoveAll(filepath.Join(state, "pods")); err != nil {
		t.Fatal(err)
	}

	api.down.Store(true)
	e2, stop2 := startEdge(t, api, state)
	poll("pods running offline", 5*time.Second, func() bool {
		return running(e2.agent, "u1") && running(e2.agent, "u2") && runningContainers(t, e2.agent) == 2
	})
	plainID := containerOf(t, e2.agent, "plain")
	secretFile := ""
	_ = filepath.Walk(filepath.Join(state, "pods", "u1", "volumes"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Name() == "password" {
			secretFile = p
		}
		return nil
	})
	if b, err := os.ReadFile(secretFile); err != nil || string(b) != "pw" {
		t.Fatalf("secret volume offline: %q %v", b, err)
	}

	// Deleted while the node was away.
	if err := api.Clientset.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "web"); err != nil {
		t.Fatal(err)
	}
	api.down.Store(false)
	poll("deleted pod stopped", time.Minute, func() bool { return len(e2.agent.Pods()) == 1 && runningContainers(t, e2.agent) == 1 })
	// The pod status kept while offline reaches the API server: Running,
	// naming the container started after the reboot, which still runs.
	poll("status of the kept pod in the API server", time.Minute, func() bool {
		p, err := api.CoreV1().Pods("default").Get(t.Context(), "plain", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			strings.HasSuffix(p.Status.ContainerStatuses[0].ContainerID, "://"+plainID)
	})
	if id := containerOf(t, e2.agent, "plain"); id != plainID {
		t.Errorf("kept pod restarted on reconnect: container %s, was %s", id, plainID)
	}
	if err := e2.objects.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stored, _ := e2.objects.Stored(); len(stored) != 0 { // plain uses none
		t.Errorf("copies kept for a deleted pod: %v", stored)
	}
	stop2()
	if data, err := os.ReadFile(filepath.Join(state, "checkpoints/podconfig-api.json")); err != nil || strings.Contains(string(data), `"web"`) {
		t.Errorf("stored pod set still has the deleted pod (%v)", err)
	}
}

// With --shutdown-grace-period the graceful shutdown keeps the kubelet's
// state file in the state dir, so that the shutdown gauges survive a
// reboot.
func TestShutdownStateFile(t *testing.T) {
	state := t.TempDir()
	o := options{nodeName: "n1", stateDir: state, images: "busybox", replayAfter: 500 * time.Millisecond, statusEvery: time.Second}
	o.shutdown.GracePeriod = 10 * time.Second
	e, err := build(o, newAPIServer(), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.agent.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	if err := e.shutdown.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(state, nodeshutdown.StateFileName))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var s nodeshutdown.State
	if err := json.Unmarshal(raw, &s); err != nil || s.StartTime.IsZero() || s.EndTime.Before(s.StartTime) {
		t.Errorf("state file %s (%v), want a start and an end after it", raw, err)
	}
}
