// Package podconfig gathers pods from any number of sources (manifest files,
// HTTP URLs, an HTTP push endpoint, the API server) and merges them into one
// ordered stream of PodUpdates for the sync loop.
//
// # Wiring
//
//	cfg, err := podconfig.New(podconfig.Config{Sources: []string{podconfig.SourceFile}})
//	ch, err := cfg.Channel(podconfig.SourceFile)
//	files, err := podconfig.NewFileSource(podconfig.FileSourceConfig{
//		Path: "/etc/kubernetes/manifests", NodeName: "node1", Out: ch})
//	go cfg.Run(ctx)   // the merge; closes Updates() when it returns
//	go files.Run(ctx) // fsnotify + a re-read every 20s
//	for u := range cfg.Updates() { ... }
//
// # Sources
//
// A source sends PodUpdates into the channel PodConfig.Channel(name) gives
// it. The normal update is a SET with the source's complete list of pods
// (an empty SET means "no pods" and still marks the source as seen). A
// source may also send ADD, UPDATE, DELETE or RECONCILE (all of which add or
// replace the given pods in that source's set) and REMOVE (which drops the
// given UIDs); these do not mark the source as seen. A source hands over the pods it
// sends: it must not modify them afterwards (send new objects instead; the
// shipped sources do). PodConfig never writes into them either: it stores
// a shallow copy carrying its local annotations that shares the rest of
// the object.
//
// Sources are kept apart: each has its own UID→pod map, and the same pod
// from two sources is two pods. Within one update, a second pod with the
// same namespace/name or the same UID is dropped (logged), as are nil pods
// and pods without a name or with a UID that is not a safe path segment.
//
// # Merge and notification modes
//
// Every incoming pod is fingerprinted once (spec, labels, non-local
// annotations and the deletion fields in one hash; status in another),
// walking the Go values field by field along a plan derived once from the
// API types: no encoding and no allocation. Nil and empty slices or maps are
// equal; quantities are equal when value and format are ("100m" = "0.1",
// "1Ki" ≠ "1024": the kubelet's reflect.DeepEqual would call the first an
// update); times when they are the same instant. An unchanged pod costs that
// hash and nothing else: it is not copied. A new UID is an add; a
// changed fingerprint is an update, or a delete when the pod carries a
// deletion timestamp; a changed status alone is a reconcile; a UID missing
// from a SET is a remove. Changes to the local annotations
// (kubernetes.io/config.source, config.seen, config.mirror) alone are no
// change. PodConfig sets config.source to the source name and config.seen to
// the clock's time (RFC 3339, UTC) when it first sees a UID, and keeps
// config.seen across updates.
//
// Config.Mode chooses what the consumer is told:
//
//   - Incremental (default; the kubelet's): REMOVE, ADD, UPDATE, DELETE,
//     RECONCILE, each only when non-empty, Source the source's name; on a
//     source's first SET an empty ADD when no ADD, UPDATE or DELETE was sent,
//     so the consumer learns the source is ready.
//   - Snapshot: on any change (status too) and on each source's first SET,
//     one SET with every pod of every source, Source SourceAll ("*").
//   - SnapshotAndUpdates: a SET of everything (Source SourceAll) when pods
//     were added or removed or a source sent its first SET; then UPDATE,
//     DELETE and RECONCILE for in-place changes, Source the source's name.
//
// Pods in delivered updates, MergedState and Snapshot are the stored
// objects, shared and read-only: a consumer may keep them but must not
// modify them (DeepCopy first to change one). A later change never writes
// into an object already handed out; it stores and delivers a new one. This
// is the kubelet's contract too, and what makes a load cheap: a new pod
// costs one shallow copy and a map insert, and is fingerprinted only when
// a newer version of it arrives. MergedState orders sources by name and
// each source's pods as the source last sent them.
//
// # Ordering and backpressure
//
// Run merges one update at a time (one goroutine forwards each source's
// channel, preserving that source's order; a single goroutine merges and
// delivers). Updates has a buffer of Config.UpdatesBuffer (default 50);
// when it is full, delivery blocks the merge and so every source, which is
// the intended backpressure: nothing is dropped or coalesced. Sync asks for
// a SET of the whole state in the same order. Merge is the same step,
// synchronous, for tests and for callers that drive the merge themselves.
// Run closes Updates when it returns, so "for u := range cfg.Updates()" ends.
//
// # Static pods
//
// DecodeStaticPods decodes a manifest (YAML or JSON; a Pod, a PodList or a
// List of Pods; at most MaxManifestSize bytes, at most MaxManifestDepth
// levels of nesting, YAML aliases bounded by their expanded size) and
// defaults it the way the kubelet defaults static pods:
//
//   - UID, when empty: hex FNV-128a over the decoded pod's JSON encoding, then
//     "host:<node>file:<path>" for file pods or "url:<origin>" otherwise,
//     computed before the name is rewritten: stable for the same content at
//     the same place;
//   - name "<name>-<lowercased node name>", namespace "default",
//     spec.nodeName, annotation kubernetes.io/config.hash = UID, status phase
//     Pending, and for file pods the toleration {Exists, NoExecute};
//   - the API defaults a node needs (SetPodDefaults).
//
// It then validates with ValidatePod(pod, true): the node-relevant rules of
// pod validation, plus the static-pod rule that no API object may be
// referenced (service accounts, secrets, config maps, PVCs, CSI volumes,
// resource claims, ...). Errors wrap ErrInvalidManifest, name the origin and
// the line (syntax) or field (validation, e.g. spec.containers[0].name).
//
// # File source
//
// FileSource reads a file or a directory (not recursive, dot-files skipped,
// name order). Missing path: an empty SET. A manifest that stops parsing
// keeps its last good pods (a half-written file never stops a running pod)
// and is reported through the logger and FileSourceConfig.OnError; one that
// never parsed contributes nothing; a single-file path that never parsed
// sends nothing. Unchanged bytes are not decoded again and an unchanged set
// is not sent again. Run watches with fsnotify and re-reads every Period on
// the injected clock; when watching fails it polls and retries the watch on
// every tick.
package podconfig
