// Package logs reads and rotates container logs in the CRI log format, as
// the kubelet's log reader and ContainerLogManager do.
//
// A runtime writes each container's output to the log path the agent
// gave it, <pod logs root>/<namespace>_<name>_<uid>/<container>/<restart
// count>.log, one record a line:
//
//	2026-11-26T12:00:00.000000001Z stdout F a whole line
//	2026-11-26T12:00:00.000000002Z stderr P the start of a long line
//	2026-11-26T12:00:00.000000003Z stderr F ... and its end
//
// # Reading
//
// A Reader writes a container's log to a stdout and a stderr writer with
// the options of PodLogOptions (OptionsFromPod checks them as the API
// server does): the lines of the rotated files (compressed ones too) and
// then of the live file; TailLines found by reading the files backwards
// from their end, so tailing a 100 MB log reads a few blocks (a compressed
// rotated file is decompressed, twice, when a tail reaches into it);
// LimitBytes; Since; Timestamps; Follow, which waits for more at the end,
// notices a rotation (a new file at the path) and stops once the
// container no longer runs. Partial records are joined into their line:
// a tail counts the line once and its timestamp is printed once. A nil
// writer skips its stream.
//
//	r, _ := logs.NewReader(logs.ReaderConfig{Logger: log})
//	opts, err := logs.OptionsFromPod(podLogOptions, time.Now())
//	err = r.ReadLogs(ctx, logPath, opts, alive, stdout, stderr)
//
// Differences from the kubelet: it reads the rotated files too (the
// kubelet reads only the live one, so a tail right after a rotation shows
// almost nothing); a tail starts at a record, so a line of the other
// stream begun before it (partial records of both streams interleaved)
// shows from that record on.
//
// kuberuntime.Manager.GetContainerLogs uses it to serve /containerLogs.
//
// Files lists a log's rotation set and Remove deletes it (as the kubelet
// does when it removes a dead container).
package logs
