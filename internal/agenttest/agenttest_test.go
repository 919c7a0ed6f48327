package agenttest

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestNameSink(t *testing.T) {
	s := NewNameSink()
	if _, ok := s.Status("a"); ok {
		t.Fatal("status before any sync")
	}
	st := v1.PodStatus{Phase: v1.PodRunning}
	if err := s.SyncPodStatus(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, st); err != nil {
		t.Fatal(err)
	}
	st.Phase = v1.PodFailed // the sink keeps its own copy
	select {
	case <-s.Changed():
	default:
		t.Fatal("no change signalled")
	}
	if got, ok := s.Status("a"); !ok || got.Phase != v1.PodRunning {
		t.Errorf("Status(a) = %v %v", got.Phase, ok)
	}
	if p := s.Phases(); len(p) != 1 || p["a"] != v1.PodRunning {
		t.Errorf("Phases() = %v", p)
	}
}

func TestWaitUntilWakesOnChange(t *testing.T) {
	s := NewNameSink()
	go func() {
		_ = s.SyncPodStatus(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, v1.PodStatus{Phase: v1.PodSucceeded})
	}()
	WaitUntil(t, time.Minute, s.Changed(), "b Succeeded", func() (bool, string) {
		return s.Phases()["b"] == v1.PodSucceeded, ""
	})
}

func TestPodManifest(t *testing.T) {
	var pod v1.Pod
	if err := yaml.UnmarshalStrict([]byte(PodManifest("p", Forever)), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers
	if pod.Name != "p" || !pod.Spec.HostNetwork || len(c) != 1 || c[0].Image != "busybox:1" ||
		strings.Join(c[0].Command, " ") != "sh -c "+Forever {
		t.Errorf("manifest decodes to %+v", pod.Spec)
	}
}
