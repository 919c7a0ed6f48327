package nodekit

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubetypes"
)

// WithEventRecorder adds r to the agent's event recorders. Every part
// records the kubelet's events (image pulls, container starts and
// back-offs, probe failures, admission rejections, evictions, node
// conditions) through them; the agent always also writes each event as
// one line to its logger ("Event occurred", named "events"). Calls add up.
// clusterapiserver.Wire adds the API server's recorder
// (events/apiserver); events.LastWarnings keeps each pod's last warning.
func (b *Builder) WithEventRecorder(r kubetypes.EventRecorder) *Builder {
	if r == nil {
		b.misuse = append(b.misuse, configErr("builder", "WithEventRecorder was given a nil recorder"))
		return b
	}
	b.recorders = append(b.recorders, r)
	return b
}

// buildRecorder makes the agent's recorder: the zap one on the logger,
// then every WithEventRecorder, in order.
func (bd *build) buildRecorder() {
	z, err := events.NewZap(events.ZapConfig{Logger: bd.log.Named("events")})
	if err != nil {
		bd.fail(partErr("events", err))
		return
	}
	all := append([]kubetypes.EventRecorder{z}, bd.b.recorders...)
	bd.rec = events.NewMulti(all...)
	bd.a.recorder, bd.a.node = bd.rec, bd.b.nodeName
}

// EventRecorder returns the recorder the agent's parts record events
// through (the logger's and every WithEventRecorder); parts wired outside
// the Builder (node status in cluster mode) record through it too.
func (a *Agent) EventRecorder() kubetypes.EventRecorder {
	return kubetypes.RecorderOrNop(a.recorder)
}

// recordStarting records the node's Starting event, as the kubelet does
// when it starts.
func (a *Agent) recordStarting() {
	a.EventRecorder().Event(kubetypes.NodeRef(a.node), v1.EventTypeNormal, kubetypes.ReasonStarting, "Starting kubelet.")
}
