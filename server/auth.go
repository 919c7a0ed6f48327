package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// The identity and group of an anonymous request (as the API server's).
const (
	AnonymousUser  = "system:anonymous"
	AnonymousGroup = "system:unauthenticated"
	// AuthenticatedGroup is added to every authenticated user's groups.
	AuthenticatedGroup = "system:authenticated"
)

// Authenticator identifies the caller of a request. ok false with a nil
// error means no credentials it recognises (401).
type Authenticator interface {
	Authenticate(r *http.Request) (u *User, ok bool, err error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (*User, bool, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (*User, bool, error) { return f(r) }

// Attributes describe one authorization check of a request, as the
// kubelet's: resource "nodes" in API version "v1", named after the node,
// with one subresource.
type Attributes struct {
	User            *User
	Verb            string
	Namespace       string
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Name            string
	ResourceRequest bool
	Path            string
}

// Decision is an authorizer's answer.
type Decision int

// The decisions, as k8s.io/apiserver's.
const (
	DecisionDeny Decision = iota
	DecisionAllow
	DecisionNoOpinion
)

// Authorizer decides one set of Attributes. An error is a failure to
// decide (500), not a refusal.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// AlwaysAllow allows every request: only for agents that chose it
// explicitly (the kubelet's --authorization-mode=AlwaysAllow).
type AlwaysAllow struct{}

// Authorize allows.
func (AlwaysAllow) Authorize(context.Context, Attributes) (Decision, string, error) {
	return DecisionAllow, "", nil
}

// isSubpath reports whether p is path or below it.
func isSubpath(p, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return p == path || (strings.HasPrefix(p, path) && len(p) > len(path) && p[len(path)] == '/')
}

// RequestAttributes returns the authorization checks of r for user u on
// node, in order, as the kubelet 1.36 makes them (fine-grained
// authorization, locked on): the verb from the method; /pods and
// /runningpods check "pods", /healthz "healthz" and /configz "configz"
// first and "proxy" after; /stats "stats", /metrics "metrics", /logs "log",
// /checkpoint "checkpoint", /statusz "statusz", /flagz "configz"; anything
// else "proxy". The request is allowed when any check is.
func RequestAttributes(node string, u *User, r *http.Request) []Attributes {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := r.URL.Path
	subs := make([]string, 0, 2)
	switch {
	case isSubpath(p, "/pods"):
		subs = append(subs, "pods")
	case isSubpath(p, "/healthz"):
		subs = append(subs, "healthz")
	case isSubpath(p, "/configz"):
		subs = append(subs, "configz")
	case isSubpath(p, "/runningpods/"):
		subs = append(subs, "pods")
	}
	switch {
	case isSubpath(p, "/stats"):
		subs = append(subs, "stats")
	case isSubpath(p, "/metrics"):
		subs = append(subs, "metrics")
	case isSubpath(p, "/logs"):
		subs = append(subs, "log")
	case isSubpath(p, "/checkpoint"):
		subs = append(subs, "checkpoint")
	case isSubpath(p, "/statusz"):
		subs = append(subs, "statusz")
	case isSubpath(p, "/flagz"):
		subs = append(subs, "configz")
	default:
		subs = append(subs, "proxy")
	}
	out := make([]Attributes, len(subs))
	for i, s := range subs {
		out[i] = Attributes{User: u, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: s,
			Name: node, ResourceRequest: true, Path: p}
	}
	return out
}

// X509Authenticator authenticates requests by a TLS client certificate
// verified against Roots for client authentication: the user is the
// certificate's common name, the groups its organizations (as the API
// server's x509 authenticator). A request without a certificate is not
// authenticated (ok false); one with a certificate that does not verify is
// an error.
type X509Authenticator struct {
	Roots *x509.CertPool
}

// Authenticate verifies r's client certificate chain.
func (a X509Authenticator) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || a.Roots == nil {
		return nil, false, nil
	}
	certs := r.TLS.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: a.Roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, false, fmt.Errorf("verifying client certificate: %w", err)
	}
	if certs[0].Subject.CommonName == "" {
		return nil, false, nil
	}
	groups := append(append([]string(nil), certs[0].Subject.Organization...), AuthenticatedGroup)
	return &User{Name: certs[0].Subject.CommonName, Groups: groups}, true, nil
}

// Union tries each Authenticator in order: the first to authenticate wins.
// Errors are returned only if none authenticates.
type Union []Authenticator

// Authenticate tries each in turn.
func (u Union) Authenticate(r *http.Request) (*User, bool, error) {
	var firstErr error
	for _, a := range u {
		user, ok, err := a.Authenticate(r)
		if ok {
			return user, true, nil
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return nil, false, firstErr
}

// Anonymous authenticates every request as system:anonymous in group
// system:unauthenticated; put it last in a Union, and only when anonymous
// requests are configured (they are still authorized).
type Anonymous struct{}

// Authenticate returns the anonymous user.
func (Anonymous) Authenticate(*http.Request) (*User, bool, error) {
	return &User{Name: AnonymousUser, Groups: []string{AnonymousGroup}}, true, nil
}
