package fake

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Session kinds of a StreamRequest.
const (
	StreamExec        = "exec"
	StreamAttach      = "attach"
	StreamPortForward = "portforward"
)

// StreamRequest is an exec, attach or port-forward session the runtime
// accepted, for a Streamer to serve.
type StreamRequest struct {
	// Kind is StreamExec, StreamAttach or StreamPortForward.
	Kind string
	// ID is the container's full id (exec, attach) or the sandbox's
	// (port-forward).
	ID string
	// Cmd is the exec command.
	Cmd []string
	// TTY, Stdin, Stdout and Stderr are the streams the client asked for.
	TTY, Stdin, Stdout, Stderr bool
	// Ports are the port-forward request's ports (may be empty).
	Ports []int32
}

// Streamer serves the streaming sessions of a Runtime: it returns the URL
// the client connects to. kuberuntime/fake/fakestream.Server is one.
type Streamer interface {
	StreamURL(req StreamRequest) (string, error)
}

// SetStreamer makes Exec, Attach and PortForward hand out s's URLs; nil
// makes them Unimplemented again (the default).
func (r *Runtime) SetStreamer(s Streamer) {
	r.mu.Lock()
	r.streams = s
	r.mu.Unlock()
}

// streamer returns the Streamer, or Unimplemented.
func (r *Runtime) streamer(method string) (Streamer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == nil {
		return nil, coded(codes.Unimplemented, ErrUnimplemented, "%s needs a Streamer (kuberuntime/fake/fakestream)", method)
	}
	return r.streams, nil
}

// runningContainer checks that id names a running container and returns
// its full id.
func (r *Runtime) runningContainer(id string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupContainerLocked(id)
	if c == nil {
		return "", notFound("container", id)
	}
	r.advanceLocked(c, r.nowNano())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return "", coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	return c.id, nil
}

func checkStreams(tty, stdin, stdout, stderr bool) error {
	if !stdin && !stdout && !stderr {
		return coded(codes.InvalidArgument, ErrInvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	if tty && stderr {
		return coded(codes.InvalidArgument, ErrInvalidArgument, "tty and stderr cannot both be true")
	}
	return nil
}

// Exec checks the request (a running container, a command, at least one
// stream, not tty with stderr) and returns the URL of an exec session from
// the runtime's Streamer; without one it returns Unimplemented.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := r.begin(ctx, "Exec", req.GetContainerId(), strings.Join(req.GetCmd(), " "), 0); err != nil {
		return nil, err
	}
	s, err := r.streamer("Exec")
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, coded(codes.InvalidArgument, ErrInvalidArgument, "Exec: empty command")
	}
	if err := checkStreams(req.GetTty(), req.GetStdin(), req.GetStdout(), req.GetStderr()); err != nil {
		return nil, err
	}
	id, err := r.runningContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	u, err := s.StreamURL(StreamRequest{Kind: StreamExec, ID: id, Cmd: slices.Clone(req.GetCmd()),
		TTY: req.GetTty(), Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr()})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// Attach checks the request as Exec does and returns the URL of an attach
// session from the runtime's Streamer; without one it returns Unimplemented.
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := r.begin(ctx, "Attach", req.GetContainerId(), "", 0); err != nil {
		return nil, err
	}
	s, err := r.streamer("Attach")
	if err != nil {
		return nil, err
	}
	if err := checkStreams(req.GetTty(), req.GetStdin(), req.GetStdout(), req.GetStderr()); err != nil {
		return nil, err
	}
	id, err := r.runningContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	u, err := s.StreamURL(StreamRequest{Kind: StreamAttach, ID: id,
		TTY: req.GetTty(), Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr()})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// PortForward checks the request (a ready sandbox, ports 1-65535) and
// returns the URL of a port-forward session from the runtime's Streamer;
// without one it returns Unimplemented.
func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := r.begin(ctx, "PortForward", req.GetPodSandboxId(), "", 0); err != nil {
		return nil, err
	}
	s, err := r.streamer("PortForward")
	if err != nil {
		return nil, err
	}
	for _, p := range req.GetPort() {
		if p <= 0 || p > 65535 {
			return nil, coded(codes.InvalidArgument, ErrInvalidArgument, "port %d out of range", p)
		}
	}
	r.mu.Lock()
	sb := r.lookupSandboxLocked(req.GetPodSandboxId())
	var id string
	var ready bool
	if sb != nil {
		id, ready = sb.id, sb.state == runtimeapi.PodSandboxState_SANDBOX_READY
	}
	r.mu.Unlock()
	if sb == nil {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	if !ready {
		return nil, coded(codes.FailedPrecondition, ErrFailedPrecondition, "sandbox %q is not ready", id)
	}
	u, err := s.StreamURL(StreamRequest{Kind: StreamPortForward, ID: id, Ports: slices.Clone(req.GetPort())})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}
