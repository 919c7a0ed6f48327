// Package fakestream is the streaming server of the fake CRI runtime
// (kuberuntime/fake): with it the fake's Exec, Attach and PortForward return
// one-time URLs that work as containerd's do, so kubectl, client-go's
// executors and a node server's /exec, /attach and /portForward proxies can
// be tested without a real runtime.
//
//	rt, _ := fake.New(fake.Config{Clock: clk})
//	lis, _ := net.Listen("tcp", "127.0.0.1:0")
//	srv, _ := fakestream.New(fakestream.Config{Runtime: rt, Listener: lis, Clock: clk})
//	go srv.Run(ctx) // until ctx ends; then every session ends and Run returns
//	resp, _ := rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"echo", "hi"}, Stdout: true})
//	// resp.Url: http://127.0.0.1:PORT/exec/TOKEN
//
// # Protocols
//
// Exec and attach sessions speak SPDY with the remote command protocols
// v4.channel.k8s.io, v3 and v2 (what the API server and kubectl use towards a
// kubelet), and WebSocket with v5.channel.k8s.io, v4 and older (what kubectl
// 1.36 tries first). A non-zero exit code reaches the client as the kubelet
// sends it (a NonZeroExitCode status on v4 and v5, so kubectl exits with
// the code). Port-forward sessions speak SPDY with portforward.k8s.io: each
// forwarded connection is a pair of streams (error and data) that goes to
// Config.PortForward, by default an echo server on every port; its error is
// sent on the error stream. The framing is k8s.io/streaming's.
//
// What a session does in the container (the exec interpreter, attach
// output, AppendLog) is the fake's: see its package documentation.
//
// # URLs and lifetime
//
// A URL works once and expires after Config.TokenTTL (one minute, as the
// kubelet's) on Config.Clock, which should be the runtime's. A client must
// open its streams within Config.StreamCreationTimeout of real time (30s).
// Run follows the lifecycle contract: when ctx ends it closes the listener,
// ends every session in progress and returns once all their goroutines are
// gone; a Runtime asked for a session afterwards answers Unavailable.
package fakestream
