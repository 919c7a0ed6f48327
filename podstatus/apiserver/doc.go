// Package apiserver is the status manager's Kubernetes API server side:
// PodStatusSink delivers pod statuses to the API server, and MirrorClient
// keeps a mirror pod there for every static pod, as the kubelet does. Both
// work with a node's own credential (system:node:<name> under the Node
// authorizer and NodeRestriction). It is the only part of podstatus that
// imports client-go.
//
//	sink, _ := apiserver.NewPodStatusSink(apiserver.PodStatusSinkConfig{Client: client})
//	sm, _ := podstatus.New(podstatus.Config{Sink: sink})
//	mirrors, _ := apiserver.NewMirrorClient(apiserver.MirrorClientConfig{
//		Client: client, NodeName: name, StaticPods: agent.StaticPods,
//	})
//	go sm.Run(ctx)
//	go mirrors.Run(ctx)
//
// PodStatusSink patches the status subresource with a strategic merge
// patch carrying the pod's UID as a precondition, sends only what changed
// since the status it last sent (the podstatus.Manager hands over only the
// latest status per pod, also after an outage), reports a static pod's
// status on its current mirror pod (ErrNoMirrorPod while there is none, so
// the manager offers it again), skips pods that are gone, and deletes a
// finished pod with a deletion timestamp (PodDeleter; never a mirror pod).
//
// MirrorClient creates a mirror pod with the static pod's metadata and
// spec, the kubernetes.io/config.mirror annotation set to the static pod's
// config hash and the Node as its owner; it replaces a mirror whose hash
// differs or that is being deleted, and deletes a mirror without a static
// pod.
package apiserver
