// Package apiserver gives the volume plugins (and the runtime's env sources)
// their configMaps, secrets and service account tokens from a Kubernetes API
// server. It is the only part of volumemgr that imports client-go.
//
//	objs, err := apiserver.New(clientset)
//	plugins := volumemgr.DefaultPlugins(volumemgr.PluginsConfig{Objects: objs, Tokens: objs})
//	rcfg.EnvSources = objs // kuberuntime.Config: configMapKeyRef / secretKeyRef / envFrom
//
// Every read is a GET: a node's credentials (the Node authorizer) may read
// exactly the objects its pods reference.
//
// Persisted (NewPersisted) does the same reads and keeps a copy of every
// configMap, secret and service account token on disk (atomic, checksummed, 0600 files in 0700
// directories), so an edge node whose API server is unreachable can still
// start its pods after a reboot; Run refreshes the copies and removes the
// ones no pod uses any more:
//
//	objs, err := apiserver.NewPersisted(apiserver.PersistConfig{
//		Client: clientset, Dir: "/var/lib/agent/objects",
//		Pods: agent.Pods, PodsReady: agent.PodConfig().SeenAllSources,
//	})
//	go objs.Run(ctx)
package apiserver
