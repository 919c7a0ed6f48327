package fakestream

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrAlreadyRan is returned by a second Run (the same value as
	// lifecycle.ErrAlreadyRan).
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrStopped: the server's Run has returned; no new session is handed out.
	ErrStopped = errors.New("fakestream: the stream server has stopped")
)

// unavailable is ErrStopped with gRPC code Unavailable, as a CRI call that
// can't be served now reports it.
type unavailable struct{}

func (unavailable) Error() string { return ErrStopped.Error() }
func (unavailable) Unwrap() error { return ErrStopped }

// GRPCStatus gives the error its gRPC code.
func (unavailable) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, ErrStopped.Error())
}
