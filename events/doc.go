// Package events holds the event recorders nodekit ships that need no API
// server: what `kubectl describe` would show, for an agent without a
// cluster, for logs and for tests. The recorder interface itself,
// kubetypes.EventRecorder, is declared in kubetypes so that every part
// can take one in its Config; events/apiserver writes events to the API
// server.
//
//   - Zap writes one structured line per event ("Event occurred" with the
//     object, type, reason and message).
//   - Fake keeps every event for a test to read back (Events, WithReason,
//     For, Reasons).
//   - LastWarnings keeps each pod's last Warning, for a table of pods.
//   - NewMulti hands every event to several recorders.
//
// None of them blocks the caller beyond a mutex or a log write, and none
// fails it: an event whose object has no reference is dropped.
//
// The Builder wires a Zap recorder on its logger plus every recorder given
// to WithEventRecorder, and passes the result to each part's Config:
//
//	warnings, _ := events.NewLastWarnings(events.LastWarningsConfig{})
//	agent, err := nodekit.NewBuilder().WithEventRecorder(warnings)...Build()
//	...
//	if w, ok := warnings.Last(pod.UID); ok {
//		fmt.Println(w.Reason, w.Message)
//	}
//
// Parts record events with the kubelet's reasons (kubetypes.Reason*) and
// message shapes, about a pod (kubetypes.PodRef), one of its containers
// (kubetypes.ContainerRef: field path spec.containers{name}) or the node
// (kubetypes.NodeRef).
package events
