// Package apiserver connects nodestatus to a Kubernetes API server through
// client-go: Sink registers the node and patches its status, and
// LeaseController keeps the node's Lease renewed. Both work with a node's own
// credential (user system:node:<name>, group system:nodes) under the Node
// authorizer and NodeRestriction admission: they only touch the node's own
// Node object, its status and its Lease in kube-node-lease.
//
// Registration creates the Node; if it exists, the agent's default labels,
// missing capacity/allocatable and huge page sizes are reconciled with a
// status patch. Status updates are strategic merge patches of the status
// subresource (spec never sent; addresses replaced as a whole), computed
// against the node as last read or written (first try) or a fresh GET
// (later tries); nodestatus.Controller decides when to send them.
//
// The lease is named after the node, held by it, lasts 40s, is renewed every
// 10s with up to 5 update tries (a conflict re-reads it), and is owned by the
// Node object (so it goes away with it). After a failed renewal the next
// one comes after 100ms, doubling up to 7s, for as long as it takes: an
// API server that returns sees a renewal within 7s. A renew time never
// goes back: when the clock is behind the lease's renew time (it jumped
// back), the renewal is the old renew time plus the time since the last
// write, as the node lifecycle controller only counts a renew time later
// than the one it saw. Stopping the controller leaves the lease to expire.
//
// The pod side (pod status patches and mirror pods) is podstatus/apiserver.
//
//	sink, _ := apiserver.NewSink(apiserver.SinkConfig{Client: client, NodeName: name})
//	ctrl, _ := nodestatus.New(nodestatus.Config{NodeName: name, Sink: sink, Setters: setters})
//	lease, _ := apiserver.NewLease(apiserver.LeaseConfig{Client: client, NodeName: name})
//	go ctrl.Run(ctx)
//	go lease.Run(ctx)
package apiserver
