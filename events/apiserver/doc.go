// Package apiserver writes a node agent's events to the Kubernetes API
// server, so that `kubectl describe pod` and `kubectl get events` show them.
// Recorder is a kubetypes.EventRecorder; clusterapiserver.Wire adds one to
// the agent by default.
//
//	rec, err := apiserver.New(apiserver.Config{Client: client, NodeName: "node-1", Registerer: reg})
//	b.WithEventRecorder(rec)                 // every part records through it
//	go rec.Run(ctx)                          // Wire runs it as a cluster part
//
// # What it does with an event
//
// Event and Eventf build the v1.Event (source kubelet on the node, the
// object's reference; a node's events go to namespace "default") and put
// it on a bounded queue (1,000). They never block: when the queue is full
// the event is dropped.
//
// Run takes the events one at a time:
//
//  1. An event older than MaxAge (1 minute) is dropped: an edge agent that
//     was offline sends no backlog storm when it reconnects.
//  2. client-go's EventCorrelator, with the kubelet's settings (client-go's
//     defaults), aggregates similar events (10 within 10 minutes become one
//     "combined from similar events"), counts repeated ones (one event with a
//     count, patched) and applies the spam filter (25 events per object and
//     type, then one per 5 minutes; the counts still add up).
//  3. Writes are limited to QPS 50 with a burst of 100, the kubelet's
//     eventRecordQPS and eventBurst.
//  4. The event gets one try: a create, or a strategic-merge patch of the
//     event it counts into (a create when that one is gone). A failed write
//     drops the event and the sender backs off, 1 s doubling up to 30 s, while
//     writes keep failing; an event the API server refuses (invalid,
//     forbidden) is dropped without back-off.
//
// Every dropped event is counted in nodekit_events_dropped_total{reason}
// (queue_full, too_old, filtered, send_failed, rejected, no_reference) and
// by Dropped; failures are logged (a full queue once until a write works
// again). nodekit_events_sent_total counts the writes.
//
// # Why not client-go's broadcaster
//
// The kubelet uses record.NewBroadcaster, whose sink retries each event up
// to 12 times, 10 seconds apart, while the events behind it wait, and whose
// queue of 1,000 drops silently when it overflows. On an edge appliance with
// its API server gone that is two minutes of retries per event and then a
// backlog; it contradicts "never blocks, not retried forever". The
// correlator is the broadcaster's own, used directly, so aggregation and the
// spam filter are the kubelet's; only the queue, the single try, the back-off
// and the age limit are this package's.
package apiserver
