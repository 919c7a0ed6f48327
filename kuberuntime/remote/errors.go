package remote

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error a Client method returns for a failed call
// wraps one of these (or none, for gRPC codes without a sentinel); match them
// with errors.Is. The gRPC status survives the wrapping: errors.As to
// *StatusError, or status.FromError / status.Code, still give the code and
// message the runtime sent.
var (
	// ErrNotFound: the runtime has no such sandbox, container or image
	// (gRPC NotFound). See also IsNotFound.
	ErrNotFound = errors.New("remote: not found")
	// ErrAlreadyExists: the object already exists (gRPC AlreadyExists).
	ErrAlreadyExists = errors.New("remote: already exists")
	// ErrInvalidArgument: the runtime rejected the request (gRPC InvalidArgument).
	ErrInvalidArgument = errors.New("remote: invalid argument")
	// ErrUnavailable: the runtime can't be reached (gRPC Unavailable: no
	// socket, nobody listening, connection refused or reset).
	ErrUnavailable = errors.New("remote: unavailable")
	// ErrDeadlineExceeded: the call's deadline (ours or the caller's) passed
	// before the runtime answered (gRPC DeadlineExceeded). Such errors also
	// match context.DeadlineExceeded.
	ErrDeadlineExceeded = errors.New("remote: deadline exceeded")
	// ErrUnimplemented: the runtime does not implement this method (gRPC
	// Unimplemented), e.g. containerd 1.6 for GetContainerEvents and
	// RuntimeConfig. Callers use it to fall back.
	ErrUnimplemented = errors.New("remote: unimplemented")
	// ErrResourceExhausted: gRPC ResourceExhausted; in particular a request or
	// response larger than Config.MaxMsgSize.
	ErrResourceExhausted = errors.New("remote: resource exhausted")
	// ErrUnsupportedAPI: the endpoint answers gRPC but does not serve the CRI
	// v1 RuntimeService (it may speak only v1alpha2 or be something else).
	// Returned by Connect.
	ErrUnsupportedAPI = errors.New("remote: endpoint does not serve CRI v1")
	// ErrInvalidEndpoint: Config.Endpoint is not a unix socket address.
	ErrInvalidEndpoint = errors.New("remote: invalid endpoint")
	// ErrInvalidConfig: another Config field is bad (the error names it).
	ErrInvalidConfig = errors.New("remote: invalid config")
	// ErrInvalidResponse: the runtime answered with a response that breaks
	// the CRI contract (e.g. RunPodSandbox without a sandbox ID).
	ErrInvalidResponse = errors.New("remote: invalid response")
	// ErrClosed: the Client was closed (before or during the call).
	ErrClosed = errors.New("remote: client closed")
)

// IsNotFound reports whether err means "no such object": it wraps
// ErrNotFound, or it carries a gRPC status with code NotFound (as errors from
// an in-process CRI implementation such as runtime/fake do).
func IsNotFound(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNotFound) {
		return true
	}
	return status.Code(err) == codes.NotFound
}

// StatusError is the error a Client method returns when the runtime (or the
// gRPC transport) failed the call. Its text reads
//
//	remote: StartContainer "abc": not found: container "abc" does not exist
//
// It unwraps to the sentinel for its code (ErrNotFound, ErrUnavailable, ...)
// and implements GRPCStatus, so status.FromError(err) and status.Code(err)
// see the original status through any further wrapping.
type StatusError struct {
	// Method is the CRI method, e.g. "StartContainer".
	Method string
	// ID is the sandbox, container or image the call was about ("" if none).
	ID string
	// Code and Message are the gRPC status.
	Code    codes.Code
	Message string
	// Detail is extra context added by the client (e.g. the size limit); it
	// may be empty.
	Detail string

	st       *status.Status
	wrapped  []error
	codeText string
}

// Error implements error.
func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString("remote: ")
	b.WriteString(e.Method)
	if e.ID != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.ID))
	}
	b.WriteString(": ")
	b.WriteString(e.codeText)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteByte(')')
	}
	return b.String()
}

// Unwrap gives the sentinel(s) matching the code, for errors.Is.
func (e *StatusError) Unwrap() []error { return e.wrapped }

// GRPCStatus gives the runtime's gRPC status (used by status.FromError).
func (e *StatusError) GRPCStatus() *status.Status { return e.st }

// codeText is the lower-case words of a gRPC code used in error texts.
func codeText(c codes.Code) string {
	switch c {
	case codes.NotFound:
		return "not found"
	case codes.AlreadyExists:
		return "already exists"
	case codes.InvalidArgument:
		return "invalid argument"
	case codes.Unavailable:
		return "unavailable"
	case codes.DeadlineExceeded:
		return "deadline exceeded"
	case codes.Unimplemented:
		return "unimplemented"
	case codes.ResourceExhausted:
		return "resource exhausted"
	case codes.Canceled:
		return "canceled"
	case codes.FailedPrecondition:
		return "failed precondition"
	case codes.PermissionDenied:
		return "permission denied"
	case codes.Unauthenticated:
		return "unauthenticated"
	case codes.Internal:
		return "internal"
	case codes.Unknown:
		return "unknown"
	case codes.Aborted:
		return "aborted"
	case codes.OutOfRange:
		return "out of range"
	case codes.DataLoss:
		return "data loss"
	default:
		return "code " + c.String()
	}
}

// sentinelsFor lists what a StatusError with code c unwraps to.
func sentinelsFor(c codes.Code) []error {
	switch c {
	case codes.NotFound:
		return []error{ErrNotFound}
	case codes.AlreadyExists:
		return []error{ErrAlreadyExists}
	case codes.InvalidArgument:
		return []error{ErrInvalidArgument}
	case codes.Unavailable:
		return []error{ErrUnavailable}
	case codes.DeadlineExceeded:
		return []error{ErrDeadlineExceeded, context.DeadlineExceeded}
	case codes.Unimplemented:
		return []error{ErrUnimplemented}
	case codes.ResourceExhausted:
		return []error{ErrResourceExhausted}
	case codes.Canceled:
		return []error{context.Canceled}
	default:
		return nil
	}
}

// newStatusError builds the StatusError for a failed call. err must be
// non-nil. Errors without a gRPC status (which gRPC itself never returns)
// are treated as codes.Unknown but stay wrapped.
func newStatusError(method, id string, err error) *StatusError {
	st, ok := status.FromError(err)
	var extra error
	if !ok {
		// Keep the original error reachable with errors.Is/As.
		extra = err
		if errors.Is(err, context.DeadlineExceeded) {
			st = status.New(codes.DeadlineExceeded, err.Error())
		} else if errors.Is(err, context.Canceled) {
			st = status.New(codes.Canceled, err.Error())
		}
	}
	e := &StatusError{
		Method:   method,
		ID:       id,
		Code:     st.Code(),
		Message:  st.Message(),
		st:       st,
		wrapped:  sentinelsFor(st.Code()),
		codeText: codeText(st.Code()),
	}
	if extra != nil {
		e.wrapped = append(e.wrapped, extra)
	}
	return e
}

// callError is an error of the client's own making (not a gRPC status) that
// names the method and unwraps to a sentinel.
type callError struct {
	msg  string
	errs []error
}

func (e *callError) Error() string   { return e.msg }
func (e *callError) Unwrap() []error { return e.errs }

// prefix is `remote: Method "id"` or `remote: Method`.
func prefix(method, id string) string {
	if id != "" {
		return "remote: " + method + " " + strconv.Quote(id)
	}
	return "remote: " + method
}

// closedError is returned by calls on a closed Client.
func closedError(method, id string) error {
	return &callError{msg: prefix(method, id) + ": client closed", errs: []error{ErrClosed}}
}

// invalidResponse reports a response that breaks the CRI contract.
func invalidResponse(method, id, what string) error {
	return &callError{msg: prefix(method, id) + ": invalid response: " + what, errs: []error{ErrInvalidResponse}}
}

// ExitError is returned by ExecSync when the command ran and exited with a
// non-zero code; the stdout and stderr are returned beside it as well.
// Match it with errors.As:
//
//	var exit *remote.ExitError
//	if errors.As(err, &exit) { code := exit.ExitStatus() }
//
// It satisfies k8s.io/utils/exec.ExitError, which probers check for.
type ExitError struct {
	// ContainerID and Cmd say what ran.
	ContainerID string
	Cmd         []string
	// Code is the command's exit code (never 0).
	Code int32
	// Stderr is the command's standard error as the runtime returned it.
	Stderr []byte
}

// maxStderrInError caps how much stderr Error() quotes.
const maxStderrInError = 256

// Error reads `remote: ExecSync "abc": command [sh -c exit 3] exited with code 3: <stderr>`
// (stderr trimmed and capped).
func (e *ExitError) Error() string {
	var b strings.Builder
	b.WriteString(prefix("ExecSync", e.ContainerID))
	fmt.Fprintf(&b, ": command %v exited with code %d", e.Cmd, e.Code)
	msg := strings.TrimSpace(string(e.Stderr))
	if len(msg) > maxStderrInError {
		msg = msg[:maxStderrInError] + "..."
	}
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// String is Error (for k8s.io/utils/exec.ExitError).
func (e *ExitError) String() string { return e.Error() }

// Exited is always true: the command ran and exited.
func (e *ExitError) Exited() bool { return true }

// ExitStatus is the exit code.
func (e *ExitError) ExitStatus() int { return int(e.Code) }
