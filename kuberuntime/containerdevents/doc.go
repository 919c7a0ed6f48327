// Package containerdevents follows containerd's own event service (not the
// CRI) for container exits and OOM kills.
//
// containerd serves its native Events service on the same socket as the
// CRI. It publishes /tasks/exit within milliseconds of a container's exit,
// while the CRI plugin of containerd 1.6 reports the exit in
// ContainerStatus only after it has torn the task down (hundreds of
// milliseconds later) and has no CRI container events at all. A Watcher
// subscribes to /tasks/exit and /tasks/oom of one namespace ("k8s.io", the
// CRI plugin's, whose container ids are the CRI ids) and hands each event,
// decoded, to a Handler:
//
//	Exit        the container's main process exited: ExitCode, FinishedAt,
//	            OOMKilled (an OOM event came first); exits of exec
//	            processes are not delivered
//	OOM         the OOM killer killed a process of the container
//	Subscribed  a stream was (re)opened; events while none was open are
//	            lost, so a consumer resyncs on every one after the first
//
// A stream that fails is reopened after a back-off (100ms doubling to 10s).
// Malformed or unknown messages are logged and skipped. An endpoint
// without the service (not containerd) makes Run return ErrUnsupported.
//
// The few messages it needs are encoded by hand (protowire) with a gRPC
// codec of its own, so it does not depend on the containerd module. The
// wire format is the same in containerd 1.6, 1.7 and 2.x.
//
// # Wiring
//
//	w, err := containerdevents.New(containerdevents.Config{
//		Endpoint: "unix:///run/containerd/containerd.sock",
//		Handler: func(ctx context.Context, ev containerdevents.Event) {
//			if ev.Type == containerdevents.Exit {
//				plg.ContainerExited(ctx, pleg.ContainerExit{ID: ev.ContainerID, ...})
//			}
//		},
//		Logger: log,
//	})
//	go w.Run(ctx)
//
// nodekit's Builder does this with containerdwire.Events.
package containerdevents
