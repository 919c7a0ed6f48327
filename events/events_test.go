package events

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

var _ kubetypes.EventRecorder = (*Zap)(nil)
var _ kubetypes.EventRecorder = (*Fake)(nil)
var _ kubetypes.EventRecorder = (*LastWarnings)(nil)
var _ kubetypes.EventRecorder = Multi(nil)

func testPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init"}},
			Containers:     []v1.Container{{Name: "app"}},
		}}
}

func TestZapOneLinePerEvent(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	z, err := NewZap(ZapConfig{Logger: zap.New(core), WarningsAtWarn: true})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("web", "u1")
	z.Eventf(kubetypes.ContainerRef(pod, "init"), v1.EventTypeWarning, kubetypes.ReasonBackOff, "Back-off restarting failed container %s", "init")
	z.Event(pod, v1.EventTypeNormal, kubetypes.ReasonSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	z.Event(nil, v1.EventTypeNormal, "X", "no object")
	all := logs.All()
	if len(all) != 3 {
		t.Fatalf("got %d lines, want 2 events and 1 warning about the nil object: %v", len(all), all)
	}
	first := all[0]
	if first.Level != zapcore.WarnLevel || first.Message != "Event occurred" {
		t.Errorf("first line %v %q", first.Level, first.Message)
	}
	f := first.ContextMap()
	obj, _ := f["object"].(map[string]any)
	if f["reason"] != "BackOff" || f["type"] != "Warning" || f["message"] != "Back-off restarting failed container init" ||
		obj["fieldPath"] != "spec.initContainers{init}" || obj["name"] != "web" || obj["uid"] != "u1" {
		t.Errorf("first line fields %v", f)
	}
	if all[1].Level != zapcore.InfoLevel || all[1].ContextMap()["reason"] != "SandboxChanged" {
		t.Errorf("second line %v %v", all[1].Level, all[1].ContextMap())
	}
	if all[2].Level != zapcore.WarnLevel || !strings.Contains(all[2].Message, "dropped") {
		t.Errorf("third line %v %q", all[2].Level, all[2].Message)
	}
}

func TestZapSkipsFormattingWhenDisabled(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	z, _ := NewZap(ZapConfig{Logger: zap.New(core)})
	called := false
	z.Eventf(testPod("p", "u"), v1.EventTypeWarning, "R", "%v", stringer(func() string { called = true; return "x" }))
	if called || logs.Len() != 0 {
		t.Errorf("formatted %v, lines %d: a disabled level must cost nothing", called, logs.Len())
	}
}

type stringer func() string

func (s stringer) String() string { return s() }

func TestFakeRecordsInOrder(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(100, 0))
	f, _ := NewFake(FakeConfig{Clock: clk})
	pod := testPod("web", "u1")
	f.Event(kubetypes.ContainerRef(pod, "app"), v1.EventTypeNormal, kubetypes.ReasonCreated, "Container created")
	clk.SetTime(time.Unix(101, 0))
	f.Eventf(kubetypes.NodeRef("n1"), v1.EventTypeNormal, kubetypes.ReasonNodeReady, "Node %s status is now: %s", "n1", "NodeReady")
	f.Event((*v1.Pod)(nil), v1.EventTypeNormal, "X", "dropped")
	if got := strings.Join(f.Reasons(), ","); got != "Created,NodeReady" {
		t.Fatalf("reasons %s", got)
	}
	if f.Dropped() != 1 {
		t.Errorf("dropped %d, want 1", f.Dropped())
	}
	ev := f.For("u1")
	if len(ev) != 1 || ev[0].Object.FieldPath != "spec.containers{app}" || !ev[0].Time.Equal(time.Unix(100, 0)) {
		t.Errorf("pod events %+v", ev)
	}
	node := f.WithReason(kubetypes.ReasonNodeReady)
	if len(node) != 1 || node[0].Message != "Node n1 status is now: NodeReady" || node[0].Object.Kind != "Node" || node[0].Object.UID != "n1" {
		t.Errorf("node events %+v", node)
	}
	f.Reset()
	if len(f.Events()) != 0 {
		t.Error("Reset kept events")
	}
}

func TestFakeZeroValueConcurrent(t *testing.T) {
	var f Fake
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				f.Event(testPod("p", "u"), v1.EventTypeNormal, "R", "m")
			}
		}()
	}
	wg.Wait()
	if n := len(f.Events()); n != 800 {
		t.Errorf("%d events, want 800", n)
	}
}

func TestMulti(t *testing.T) {
	if NewMulti() != nil || NewMulti(nil, nil) != nil {
		t.Error("no recorders must give nil")
	}
	a, b := &Fake{}, &Fake{}
	if NewMulti(nil, a) != kubetypes.EventRecorder(a) {
		t.Error("one recorder must be itself")
	}
	m := NewMulti(a, NewMulti(b, nil))
	if mm, ok := m.(Multi); !ok || len(mm) != 2 {
		t.Fatalf("nested multi not flattened: %#v", m)
	}
	m.Eventf(testPod("p", "u"), v1.EventTypeWarning, "R", "n=%d", 3)
	for _, f := range []*Fake{a, b} {
		if ev := f.Events(); len(ev) != 1 || ev[0].Message != "n=3" {
			t.Errorf("events %v", ev)
		}
	}
}

func TestLastWarnings(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	if _, err := NewLastWarnings(LastWarningsConfig{MaxPods: -1}); err == nil {
		t.Error("negative MaxPods accepted")
	}
	l, _ := NewLastWarnings(LastWarningsConfig{Clock: clk, MaxPods: 2})
	p1, p2, p3 := testPod("a", "u1"), testPod("b", "u2"), testPod("c", "u3")
	l.Event(kubetypes.ContainerRef(p1, "app"), v1.EventTypeWarning, kubetypes.ReasonBackOff, "first")
	clk.SetTime(time.Unix(1, 0))
	l.Event(p1, v1.EventTypeNormal, kubetypes.ReasonStarted, "normal is ignored")
	l.Event(kubetypes.NodeRef("n"), v1.EventTypeWarning, kubetypes.ReasonRebooted, "node is ignored")
	l.Eventf(p1, v1.EventTypeWarning, kubetypes.ReasonUnhealthy, "Readiness probe failed: %s", "x")
	if w, ok := l.Last("u1"); !ok || w.Reason != "Unhealthy" || w.Message != "Readiness probe failed: x" {
		t.Errorf("last of u1 %+v %v", w, ok)
	}
	clk.SetTime(time.Unix(2, 0))
	l.Event(p2, v1.EventTypeWarning, "R2", "m")
	clk.SetTime(time.Unix(3, 0))
	l.Event(p3, v1.EventTypeWarning, "R3", "m") // over MaxPods: u1 (oldest) goes
	if _, ok := l.Last("u1"); ok || l.Len() != 2 {
		t.Errorf("u1 kept past MaxPods; len %d", l.Len())
	}
	l.Forget("u2")
	if _, ok := l.Last("u2"); ok {
		t.Error("Forget kept u2")
	}
}

func TestObjectRefs(t *testing.T) {
	pod := testPod("web", "u1")
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg"}}}
	for name, want := range map[string]string{"app": "spec.containers{app}", "init": "spec.initContainers{init}", "dbg": "spec.ephemeralContainers{dbg}", "none": ""} {
		if got := kubetypes.ContainerRef(pod, name).FieldPath; got != want {
			t.Errorf("%s: field path %q, want %q", name, got, want)
		}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "x"}}
	if r, err := kubetypes.ObjectRef(node); err != nil || r.Kind != "Node" || r.UID != "x" {
		t.Errorf("node ref %+v %v", r, err)
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if _, err := kubetypes.ObjectRef(cm); err == nil {
		t.Error("object without a kind accepted")
	}
	cm.Kind, cm.APIVersion = "ConfigMap", "v1"
	if r, err := kubetypes.ObjectRef(cm); err != nil || r.Kind != "ConfigMap" || r.Namespace != "ns" || r.APIVersion != "v1" {
		t.Errorf("configmap ref %+v %v", r, err)
	}
}
