package events

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// Multi is an EventRecorder that hands every event to each of its
// recorders in order. Nil recorders are skipped.
type Multi []kubetypes.EventRecorder

// NewMulti returns the recorders as one: nil for none (a caller then uses
// kubetypes.NopRecorder), the recorder itself for one, else a Multi.
// Nested Multis are flattened.
func NewMulti(rs ...kubetypes.EventRecorder) kubetypes.EventRecorder {
	var out Multi
	for _, r := range rs {
		switch r := r.(type) {
		case nil:
		case Multi:
			out = append(out, r...)
		default:
			out = append(out, r)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

// Event hands the event to every recorder.
func (m Multi) Event(obj runtime.Object, typ, reason, message string) {
	for _, r := range m {
		if r != nil {
			r.Event(obj, typ, reason, message)
		}
	}
}

// Eventf formats the message once and hands the event to every recorder.
func (m Multi) Eventf(obj runtime.Object, typ, reason, messageFmt string, args ...any) {
	m.Event(obj, typ, reason, format(messageFmt, args))
}

// ForgetPod hands the pod's removal to every recorder that keeps something
// per pod (a ForgetPod(types.UID) method, as LastWarnings has).
func (m Multi) ForgetPod(uid types.UID) {
	for _, r := range m {
		if f, ok := r.(interface{ ForgetPod(types.UID) }); ok {
			f.ForgetPod(uid)
		}
	}
}
