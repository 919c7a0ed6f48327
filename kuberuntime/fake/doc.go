// Package fake is an in-memory CRI runtime for tests and simulators. A
// *Runtime satisfies cri-api's RuntimeService and ImageManagerService
// (k8s.io/cri-api/pkg/apis), and Serve makes it a real CRI v1 gRPC endpoint
// on any listener (a unix socket), so clients that only speak gRPC can use
// it too.
//
//	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}})
//	sb, _ := rt.RunPodSandbox(ctx, podSandboxConfig, "")
//	id, _ := rt.CreateContainer(ctx, sb, containerConfig, podSandboxConfig)
//	_ = rt.StartContainer(ctx, id)
//	clk.Step(5 * time.Second) // processes advance with the injected clock
//	go rt.Serve(ctx, lis)      // optional: serve it over gRPC
//
// # CRI semantics
//
// Ids are 64 random hex characters; a unique id prefix works wherever an id
// does (as containerd's index does). Timestamps are the injected clock's, in
// nanoseconds. Unknown ids give errors with gRPC code NotFound (wrapping
// ErrNotFound), except RemovePodSandbox and RemoveContainer, which are
// idempotent as CRI requires. Wrong-state calls (starting a container that is
// not CREATED, creating a container in a NOTREADY sandbox) give
// FailedPrecondition; reusing a sandbox's (name, namespace, uid, attempt) or
// a container's (name, attempt) in a sandbox gives AlreadyExists. Every
// error has a gRPC code (status.Code works in process) and keeps it over
// Serve.
//
// StopPodSandbox kills its running containers at once (exit 137) and makes
// the sandbox NOTREADY; RemovePodSandbox stops it and removes it with its
// containers. RemoveContainer kills a running container first, as the CRI
// spec says and containerd does (Config.RemoveRunningFails refuses instead).
// Host-network sandboxes report no IP, as containerd's (Config.HostIP
// gives them one); others get an IP from
// Config.PodCIDR (released on removal) and can't be created while the
// network is not ready. List filters follow CRI: id (or unique prefix),
// state, pod sandbox id and an exact-match label selector; results are
// oldest first. ImageStatus of an absent image returns a nil Image, not an
// error. ListContainerStats and ListPodSandboxStats cover running containers
// and ready sandboxes. CheckpointContainer, ListMetricDescriptors and
// ListPodSandboxMetrics return Unimplemented; so do the Stream* RPCs over
// gRPC, and Exec, Attach and PortForward without a StreamServer (below).
//
// # Simulated processes
//
// A started container runs a simulated process whose state is computed
// lazily from the injected clock whenever it is read or changed: with a
// k8s.io/utils/clock/testing.FakeClock, Step makes processes exit, and
// nothing sleeps. The process's Behavior is built in layers, each overriding
// the fields it sets:
//
//  1. default: runs forever, ignores SIGTERM, Config.DefaultMemoryBytes
//     (2 MiB) working set, Config.DefaultCPUMillicores (10m) of CPU;
//     an image whose name contains "pause" handles SIGTERM (exit 0);
//  2. Config.ImageBehaviors[image] (annotation syntax below);
//  3. the command interpreter, on Command+Args (below);
//  4. the pod's annotation BehaviorAnnotation(name) on the PodSandboxConfig;
//  5. the same annotation on the ContainerConfig.
//
// The annotation "fake.nodekit.io/behavior.<container name>" holds
// comma-separated key=value items:
//
//	run=forever          never exits on its own
//	exit=N               exits with code N (0-255); at once unless after= is given
//	after=D              exits D (a Go duration, e.g. 2s) after its start (code 0 unless exit=)
//	sigterm=ignore       StopContainer waits its timeout, then kills (137)
//	sigterm=handle[:N]   StopContainer ends it at once with code N (default 0)
//	memory=Q | R/s | Q+R/s  working set Q at start, growing by R bytes per second
//	                     (quantities like 64Mi); reaching the container's
//	                     memory limit (LinuxContainerResources) OOM-kills it:
//	                     exit 137, reason OOMKilled
//	cpu=Q                CPU burnt while running, in cores (250m, 1.5)
//
// For example "exit=1,after=2s,sigterm=ignore,memory=10Mi/s".
//
// The interpreter gives the common busybox commands the meaning they have on
// a real runtime, so one pod spec behaves alike on fake and on containerd:
//
//	sleep N                  exits 0 after N seconds (N may be 1.5, 2m, 1h, 1d,
//	                         infinity); dies of SIGTERM at once with 143, as busybox
//	                         sleep does on containerd
//	true / false             exit 0 / 1 at once
//	sh -c "<script>"         statements split at ; && || & and newlines:
//	                         `sleep N` adds N; `exit N` ends with N (after the
//	                         sleeps before it); `sleep N &` + `wait` waits for it;
//	                         `trap '<action>' TERM` (or SIGTERM, 15) makes it handle
//	                         SIGTERM, exiting with the action's `exit N` (default 0);
//	                         `trap '' TERM` makes it ignore SIGTERM (so does no trap:
//	                         a shell is PID 1); a foreground endless sleep never lets
//	                         a trap run (a real shell runs traps between commands);
//	                         echo, touch, cat, test and similar take no time;
//	                         `exec <cmd>` continues as <cmd>; a script that ends
//	                         exits with its last status; anything else (loops,
//	                         servers, unknown programs) runs forever
//	anything else, or none   not interpreted: layers 1-2 decide (runs forever,
//	                         ignores SIGTERM unless it is the pause image)
//
// A real shell runs a trap only after its foreground command ends, so
// `trap 'exit 0' TERM; sleep 3600` is not stopped until the timeout (on the
// fake too); write `trap 'exit 0' TERM; sleep 3600 & wait` for a pod that
// stops at once on both.
//
// StopContainer with timeout <= 0 kills at once (137). A process that
// handles SIGTERM exits at once with its code. One that ignores it is killed
// (137) when timeout seconds of the injected clock have passed: the call
// blocks on a timer of the injected clock (a test steps a FakeClock once
// HasWaiters is true), returns early if the process exits on its own, and
// returns the context's error if ctx ends first (the kill still happens at
// the deadline). Exit reasons are containerd's: Completed for 0, Error
// otherwise, OOMKilled for an OOM kill. ExitContainer makes a running
// process exit now (a crash).
//
// # Stats
//
// CPU usage (core-nanoseconds) grows at the behaviour's cpu rate while the
// process runs; the working set is memory= at start plus its growth, capped
// at the memory limit, and 0 once it exited. Sandbox stats sum their
// containers.
//
// # ExecSync
//
// The ExecHandler (Config.ExecHandler or SetExecHandler) scripts it; by
// default `false` exits 1 and anything else 0 with no output. A non-zero
// exit code comes back as *ExitError with the output, the way the kubelet's
// remote client reports it (ExitError satisfies k8s.io/utils/exec.ExitError);
// Serve turns it into ExecSyncResponse.ExitCode. The container must be running.
//
// # Container logs
//
// A container's log path is the sandbox's LogDirectory joined with its
// LogPath (ContainerStatus.LogPath). AppendLog(id, stream, text) writes
// text there in the CRI log format, a full record per line and a partial
// one for a last piece without a newline, stamped with the injected clock.
// The file stays open, as a real runtime's: a rotation's rename keeps
// receiving lines until ReopenContainerLog creates a new file at the path.
// The log's directory is made on the first write, as containerd makes it.
// # Exec, attach, port-forward and logs
//
// Exec, Attach and PortForward check their request (a running container or
// ready sandbox, sensible streams and ports) and hand it to the runtime's
// Streamer (SetStreamer) for a URL; without one they return Unimplemented.
// Package kuberuntime/fake/fakestream is that streaming server, kept apart
// so that programs that never stream don't link SPDY and WebSocket. Its
// sessions run on ExecStream and AttachStream:
//
// An exec session runs the exec handler when one is set (stdin unused),
// else a small interpreter: echo [-n], cat (stdin to stdout), true, false,
// exit N, and sh -c scripts of those separated by ; newlines and &&, where
// >&2 sends a statement's output to stderr; anything else exits 0 silently.
// An attach session streams what the container prints until it exits or
// the client leaves; a test makes it print with AppendLog, which also
// appends the lines to the container's log file (LogDirectory/LogPath) in
// the CRI log format. The stdin of an attach to a container whose command
// is a bare cat is echoed (and logged).
//
// # Events
//
// GetContainerEvents streams CONTAINER_CREATED/STARTED/STOPPED/DELETED
// events, each with the pod's sandbox status and container statuses after
// the change, until ctx ends. Sandboxes send events too, with the sandbox id
// as ContainerId. Exits that happen on their own are sent when they are due
// on the injected clock, even if nobody reads the runtime. A slow reader
// never blocks the runtime (events queue per subscriber).
// Config.EventsUnimplemented makes it return Unimplemented, as containerd
// 1.6 does.
//
// # Faults and calls
//
// InjectError(method, err, times) fails the next times calls of a CRI
// method (times < 0: until ClearFaults); InjectDelay(method, d) makes each
// call wait d on the injected clock first, or until its ctx ends. Calls,
// CountCalls and ResetCalls expose the recorded calls; Pulls the successful
// image pulls with their auth.
//
// # Concurrency
//
// A Runtime is safe for concurrent use. One mutex guards it and is never
// held while a call waits on the clock or a context. The only goroutines are
// the callers' own and Serve's, which it joins before returning.
package fake
