package fake

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error the fake returns for a CRI call also carries a
// gRPC status code (status.Code(err) works on it, and it keeps its code when
// served over gRPC), and wraps one of these, so errors.Is works too.
var (
	// ErrNotFound: no sandbox, container or image has the given id (codes.NotFound).
	ErrNotFound = errors.New("fake: not found")
	// ErrFailedPrecondition: the object is in the wrong state for the call,
	// e.g. starting a running container (codes.FailedPrecondition).
	ErrFailedPrecondition = errors.New("fake: failed precondition")
	// ErrAlreadyExists: a sandbox or container name is already reserved (codes.AlreadyExists).
	ErrAlreadyExists = errors.New("fake: already exists")
	// ErrInvalidArgument: a request is malformed (codes.InvalidArgument).
	ErrInvalidArgument = errors.New("fake: invalid argument")
	// ErrUnimplemented: the fake does not offer the call (codes.Unimplemented).
	ErrUnimplemented = errors.New("fake: unimplemented")
	// ErrPullFailed: the image can't be pulled (codes.NotFound).
	ErrPullFailed = errors.New("fake: image pull failed")
	// ErrInvalidConfig: a Config field is bad (the error names it).
	ErrInvalidConfig = errors.New("fake: invalid config")
)

// codedError is an error with a gRPC code that still unwraps to its sentinel.
type codedError struct {
	code codes.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// GRPCStatus lets status.Code / status.FromError (and a gRPC server) see the code.
func (e *codedError) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

func coded(code codes.Code, sentinel error, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}

func notFound(kind, id string) error {
	return coded(codes.NotFound, ErrNotFound, "%s %q", kind, id)
}

func unimplemented(method string) error {
	return coded(codes.Unimplemented, ErrUnimplemented, "%s is not implemented by the fake runtime", method)
}

// ctxErr turns a done context into the gRPC-coded error a remote call would get.
func ctxErr(ctx context.Context) error {
	return status.FromContextError(ctx.Err()).Err()
}

// ExitError is the error ExecSync returns when the command exits with a
// non-zero code; stdout and stderr are returned alongside it. It satisfies
// k8s.io/utils/exec.ExitError (the interface the kubelet's prober checks),
// so errors.As(err, &utilexec.ExitError(nil)) or a type assertion to
// interface{ ExitStatus() int } gives the code. Served over gRPC it becomes
// ExecSyncResponse.ExitCode, not an RPC error.
type ExitError struct {
	Code int32
}

func (e *ExitError) Error() string {
	return "command terminated with exit code " + strconv.Itoa(int(e.Code))
}

// String is the same as Error.
func (e *ExitError) String() string { return e.Error() }

// Exited is always true: the command ran and exited.
func (e *ExitError) Exited() bool { return true }

// ExitStatus is the command's exit code.
func (e *ExitError) ExitStatus() int { return int(e.Code) }
