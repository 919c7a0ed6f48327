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
// LimitBytes; Since; Timestamps; Follow, which waits for more at the end
// (polling every PollInterval), notices a rotation (a new file at the
// path), lets the rotated file stop growing, reads every file rotated
// since (so a follower slower than the rotations loses only what the
// retention deleted before it got there) and stops once the container no
// longer runs. Partial records are joined into their line:
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
// # Rotation
//
// A Manager rotates the logs of the running containers as the kubelet's
// ContainerLogManager, every MonitorInterval (10s), Workers (1) at a
// time: a live log of MaxSize (10 MiB) or more is renamed
// <log>.<YYYYMMDD-hhmmss> and the runtime asked to reopen it (CRI
// ReopenContainerLog); the oldest files are deleted so that at most
// MaxFiles (5) remain, the live one included; rotated files are
// compressed to .gz (through a .tmp, fsynced, then renamed). A pass first
// removes what a crash left: a .tmp, the uncompressed twin of a .gz, a
// live log renamed but never reopened (it asks the runtime to reopen). A
// failed reopen renames the log back and is tried again at the next pass;
// a runtime answering Unimplemented turns rotation off with one warning
// (ErrReopenUnimplemented, Disabled) instead of renaming back and forth.
//
//	m, err := logs.New(logs.Config{Runtime: cri, Logger: log})
//	err = m.RotateOnce(ctx) // one pass; Run(ctx) every MonitorInterval
//
// One difference from the kubelet: it renames before it compresses. The
// kubelet compresses the previous rotated file first, while the live log
// keeps growing (under load to several times MaxSize); here the rename
// comes first and the file just rotated is compressed at the next pass,
// when the runtime surely writes to the new one. The nodekit Builder runs
// a Manager by default for a runtime reached over the CRI
// (WithContainerLogRotation sets it).
//
// Files lists a log's rotation set and Remove deletes it (as the kubelet
// does when it removes a dead container).
package logs
