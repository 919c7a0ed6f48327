package certificate

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// it.
	ErrInvalidConfig = errors.New("certificate: invalid config")
	// ErrDenied: the certificate signing request was denied (the wrapping
	// error gives the CSR's name, reason and message).
	ErrDenied = errors.New("certificate: certificate signing request denied")
	// ErrFailed: the signer reported the certificate signing request as
	// failed (the wrapping error gives the reason and message).
	ErrFailed = errors.New("certificate: certificate signing request failed")
	// ErrNotBootstrapped: Run or Current before Bootstrap succeeded.
	ErrNotBootstrapped = errors.New("certificate: Bootstrap has not succeeded")
	// ErrNoServingCertificate: a TLS handshake came before the first
	// serving certificate was issued.
	ErrNoServingCertificate = errors.New("certificate: no serving certificate available yet")
	// ErrAlreadyRan: Run was called a second time (lifecycle.ErrAlreadyRan).
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
