// Package apiserver is the pod source that watches the Kubernetes API server
// for the pods bound to one node. It is the only part of podconfig that
// imports client-go.
//
// It lists and watches pods with the field selector spec.nodeName=<node>
// (client-go's Reflector) and, after every change, sends the node's full pod
// list as a podconfig SET with Source podconfig.SourceAPI; an empty initial
// list sends one empty SET, so the source counts as seen. PodConfig's
// per-source diff turns the SETs into ADD/UPDATE/REMOVE/DELETE.
//
//	pc, _ := podconfig.New(podconfig.Config{...})
//	src, _ := apiserver.New(apiserver.Config{
//		Client:   clientset,
//		NodeName: "node-1",
//		Out:      pc.Channel(ctx, podconfig.SourceAPI),
//	})
//	go src.Run(ctx) // returns after the watch has stopped
//
// A program that runs many agents in one process (a node simulator) can
// watch the pods of every node once instead (Shared: one list and watch,
// indexed by spec.nodeName) and give each node its Source:
//
//	shared, _ := apiserver.NewShared(apiserver.SharedConfig{Client: clientset})
//	go shared.Run(ctx)
//	src, _ := shared.Source("node-1", pc.Channel(ctx, podconfig.SourceAPI))
//	go src.Run(ctx)
package apiserver
