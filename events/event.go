package events

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/kubetypes"
)

// Event is one recorded event, as the recorders of this package keep it.
type Event struct {
	// Object is the involved object (see kubetypes.ObjectRef).
	Object v1.ObjectReference
	// Type is v1.EventTypeNormal or v1.EventTypeWarning.
	Type    string
	Reason  string
	Message string
	// Time is when it was recorded, on the recorder's clock.
	Time time.Time
}

// String is "Type Reason Kind/namespace/name[fieldPath]: message".
func (e Event) String() string {
	obj := e.Object.Kind + "/"
	if e.Object.Namespace != "" {
		obj += e.Object.Namespace + "/"
	}
	obj += e.Object.Name
	if e.Object.FieldPath != "" {
		obj += "[" + e.Object.FieldPath + "]"
	}
	return fmt.Sprintf("%s %s %s: %s", e.Type, e.Reason, obj, e.Message)
}

// makeEvent turns a recorder call into an Event; ok is false when the
// object has no reference (the call is then dropped).
func makeEvent(obj runtime.Object, typ, reason, message string, now time.Time) (Event, error) {
	ref, err := kubetypes.ObjectRef(obj)
	if err != nil {
		return Event{}, err
	}
	return Event{Object: *ref, Type: typ, Reason: reason, Message: message, Time: now}, nil
}

// format is fmt.Sprintf, except that a message without arguments is
// taken as is (as client-go's recorder does).
func format(messageFmt string, args []any) string {
	if len(args) == 0 {
		return messageFmt
	}
	return fmt.Sprintf(messageFmt, args...)
}
