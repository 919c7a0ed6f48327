package events

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// TestPerPodStateForgotten (issue 29): a pod's last warning goes when the
// agent's housekeeping hands the pod's removal to its recorder (a Multi,
// which forwards ForgetPod to every recorder that keeps something per
// pod); pods never forgotten are bounded by MaxPods.
func TestPerPodStateForgotten(t *testing.T) {
	l, err := NewLastWarnings(LastWarningsConfig{MaxPods: 50})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := NewFake(FakeConfig{})
	rec := NewMulti(f, l)
	forgetter, ok := rec.(interface{ ForgetPod(types.UID) })
	if !ok {
		t.Fatal("a Multi cannot forget a pod")
	}
	for i := range 40 {
		rec.Event(testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("u%d", i))), v1.EventTypeWarning, kubetypes.ReasonBackOff, "back-off")
	}
	if l.Len() != 40 {
		t.Fatalf("%d pods tracked, want 40", l.Len())
	}
	for i := range 40 {
		forgetter.ForgetPod(types.UID(fmt.Sprintf("u%d", i)))
	}
	if l.Len() != 0 {
		t.Errorf("%d pods tracked after ForgetPod", l.Len())
	}
	for i := range 200 {
		rec.Event(testPod(fmt.Sprintf("q%d", i), types.UID(fmt.Sprintf("v%d", i))), v1.EventTypeWarning, kubetypes.ReasonBackOff, "back-off")
	}
	if l.Len() != 50 {
		t.Errorf("%d pods tracked, want the cap of 50", l.Len())
	}
}
