// Package checkpoint makes any podconfig source survive a restart without
// its network: it sits between the source and PodConfig, writes every pod
// set the source delivers to disk (atomically, with a checksum, through
// internal/checkpoint) before forwarding it, and at start-up replays the
// last persisted set when the source has not delivered within ReplayAfter.
//
// An edge node that reboots while its pod server is unreachable thus runs
// its pods again within seconds. The replayed pods are the ones the source
// produced (same names and UIDs), so when the live source comes back with
// the same pods PodConfig sees no change; when it comes back with others,
// its SET replaces the replayed one. A replay never follows live data: once
// the source has delivered, Replay does nothing.
//
// Every write keeps the set it replaces as <name>.prev. A corrupt file is
// set aside as <name>.corrupt (never overwriting an earlier one) with a
// warning, and the previous set (one update older) is replayed instead,
// again with a warning; with neither usable the source starts empty. It
// never refuses to start.
//
//	pc, _ := podconfig.New(podconfig.Config{...})
//	persist, _ := checkpoint.New(checkpoint.Config{
//		Dir:    "/var/lib/agent/pods",
//		Source: podconfig.SourceHTTP,
//		Out:    pc.Channel(ctx, podconfig.SourceHTTP),
//	})
//	src, _ := podconfig.NewHTTPSource(podconfig.HTTPSourceConfig{..., Out: persist.In()})
//	go persist.Run(ctx)
//	go src.Run(ctx)
package checkpoint
