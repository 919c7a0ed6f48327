package podconfig

import "errors"

// Sentinel errors of the network sources (HTTP URL and HTTP push).
var (
	// ErrRedirectRefused: the URL source was redirected to another scheme
	// or host, or redirected too often. Custom headers (often credentials)
	// are never sent anywhere but the configured origin.
	ErrRedirectRefused = errors.New("podconfig: redirect refused")
	// ErrBodyTooLarge: a response or request body exceeds the configured
	// MaxBodyBytes. Nothing is sent for it.
	ErrBodyTooLarge = errors.New("podconfig: body too large")
	// ErrHTTPStatus: the URL source answered with a status other than 200.
	ErrHTTPStatus = errors.New("podconfig: unexpected HTTP status")
)
