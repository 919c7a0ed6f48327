// Package remote is a thin client for a CRI v1 container runtime (containerd,
// CRI-O) listening on a unix socket. *Client implements cri-api's
// RuntimeService and ImageManagerService (k8s.io/cri-api/pkg/apis) over the
// generated gRPC stubs, and so also the narrow kuberuntime.RuntimeService and
// kuberuntime.ImageService that nodekit's kuberuntime.Manager needs.
//
// What it adds to the raw stubs:
//
//   - a deadline on every call: CallTimeout for changes, ListTimeout for
//     reads, PullTimeout for pulls, and CallTimeout plus the container's own
//     timeout for StopContainer, ExecSync and CheckpointContainer (a shorter
//     deadline on the caller's ctx always wins);
//   - errors that name the method and object and wrap a sentinel per gRPC
//     code (ErrNotFound, ErrUnavailable, ErrDeadlineExceeded,
//     ErrUnimplemented, ...) while keeping the gRPC status for status.Code;
//   - a non-zero ExecSync exit as an *ExitError;
//   - a 16 MiB message limit, a lazy connection with a quick reconnect, and
//     Connect to check up front that the endpoint speaks CRI v1.
//
// Wiring:
//
//	cri, err := remote.New(remote.Config{Endpoint: "unix:///run/containerd/containerd.sock", Logger: log})
//	if err != nil { ... }                      // bad Endpoint or timeouts; no I/O was done
//	defer cri.Close(ctx)
//	if err := cri.Connect(ctx); errors.Is(err, remote.ErrUnsupportedAPI) { ... } // v1alpha2-only runtime
//	m, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri})
//
//	if _, err := cri.ContainerStatus(ctx, id, false); remote.IsNotFound(err) { ... }
//	if err := cri.GetContainerEvents(ctx, ch, nil); errors.Is(err, remote.ErrUnimplemented) { ... } // relist instead
package remote
