package apiserver

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/server"
)

// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
var ErrInvalidConfig = errors.New("server/apiserver: invalid config")

// The authorization modes (the kubelet's --authorization-mode).
const (
	ModeWebhook     = "Webhook"
	ModeAlwaysAllow = "AlwaysAllow"
)

// The kubelet's v1beta1 defaults.
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
)

// Config configures New.
type Config struct {
	// Client reaches the API server for TokenReview and
	// SubjectAccessReview (required by the webhooks).
	Client kubernetes.Interface
	// ClientCAFile verifies client certificates (the API server's
	// kubelet-client certificate); read once by New. Empty = no x509.
	ClientCAFile string
	// TokenWebhook authenticates bearer tokens with TokenReview, each
	// answer cached TokenCacheTTL (default 2m).
	TokenWebhook  bool
	TokenCacheTTL time.Duration
	// AuthorizationMode is ModeWebhook (default: SubjectAccessReview,
	// allowed answers cached AuthorizedTTL, 5m, denied UnauthorizedTTL,
	// 30s) or ModeAlwaysAllow.
	AuthorizationMode string
	AuthorizedTTL     time.Duration
	UnauthorizedTTL   time.Duration
}

// Auth is what New builds, to put in server.Config.
type Auth struct {
	// Authenticator is nil when neither x509 nor the token webhook is on.
	Authenticator server.Authenticator
	Authorizer    server.Authorizer
	// ClientCA is the pool of ClientCAFile (nil without), for the TLS
	// handshake's client certificate request.
	ClientCA *x509.CertPool
}

// retryBackoff is the webhooks' retry back-off, the API server's default
// that the kubelet uses.
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// New builds the kubelet's authenticator and authorizer with
// k8s.io/apiserver's delegating factories: x509 client certificates from
// ClientCAFile and bearer tokens by TokenReview (anonymous requests are
// server.Config.Anonymous's business), and SubjectAccessReview or
// AlwaysAllow. It reads ClientCAFile; it starts nothing.
func New(cfg Config) (*Auth, error) {
	if cfg.TokenCacheTTL == 0 {
		cfg.TokenCacheTTL = DefaultTokenCacheTTL
	}
	if cfg.AuthorizedTTL == 0 {
		cfg.AuthorizedTTL = DefaultAuthorizedCacheTTL
	}
	if cfg.UnauthorizedTTL == 0 {
		cfg.UnauthorizedTTL = DefaultUnauthorizedCacheTTL
	}
	if cfg.AuthorizationMode == "" {
		cfg.AuthorizationMode = ModeWebhook
	}
	out := &Auth{}
	ac := authenticatorfactory.DelegatingAuthenticatorConfig{CacheTTL: cfg.TokenCacheTTL}
	if cfg.ClientCAFile != "" {
		pemBytes, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ClientCAFile: %w", ErrInvalidConfig, err)
		}
		ca, err := dynamiccertificates.NewStaticCAContent("client-ca-bundle", pemBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: ClientCAFile: %w", ErrInvalidConfig, err)
		}
		ac.ClientCertificateCAContentProvider = ca
		out.ClientCA = x509.NewCertPool()
		out.ClientCA.AppendCertsFromPEM(pemBytes)
	}
	if cfg.TokenWebhook {
		if cfg.Client == nil {
			return nil, fmt.Errorf("%w: Client is required for the token webhook", ErrInvalidConfig)
		}
		ac.TokenAccessReviewClient = cfg.Client.AuthenticationV1()
		ac.WebhookRetryBackoff = retryBackoff()
	}
	// With neither method every request is unauthenticated: refused,
	// or anonymous when the server allows it.
	if cfg.ClientCAFile != "" || cfg.TokenWebhook {
		authn, _, err := ac.New()
		if err != nil {
			return nil, fmt.Errorf("%w: authentication: %w", ErrInvalidConfig, err)
		}
		out.Authenticator = Authenticator{authn}
	}
	switch cfg.AuthorizationMode {
	case ModeAlwaysAllow:
		out.Authorizer = server.AlwaysAllow{}
	case ModeWebhook:
		if cfg.Client == nil {
			return nil, fmt.Errorf("%w: Client is required for Webhook authorization", ErrInvalidConfig)
		}
		az, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: cfg.Client.AuthorizationV1(),
			AllowCacheTTL:             cfg.AuthorizedTTL,
			DenyCacheTTL:              cfg.UnauthorizedTTL,
			WebhookRetryBackoff:       retryBackoff(),
		}.New()
		if err != nil {
			return nil, fmt.Errorf("%w: authorization: %w", ErrInvalidConfig, err)
		}
		out.Authorizer = Authorizer{az}
	default:
		return nil, fmt.Errorf("%w: AuthorizationMode %q (want %s or %s)", ErrInvalidConfig, cfg.AuthorizationMode, ModeWebhook, ModeAlwaysAllow)
	}
	return out, nil
}

// Authenticator adapts a k8s.io/apiserver request authenticator.
type Authenticator struct{ Request authenticator.Request }

// Authenticate runs the wrapped authenticator.
func (a Authenticator) Authenticate(r *http.Request) (*server.User, bool, error) {
	resp, ok, err := a.Request.AuthenticateRequest(r)
	if err != nil || !ok || resp == nil || resp.User == nil {
		return nil, false, err
	}
	u := resp.User
	return &server.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}, true, nil
}

// Authorizer adapts a k8s.io/apiserver authorizer.
type Authorizer struct{ Authorizer authorizer.Authorizer }

// Authorize runs the wrapped authorizer on a's record.
func (a Authorizer) Authorize(ctx context.Context, at server.Attributes) (server.Decision, string, error) {
	var u user.Info
	if at.User != nil {
		u = &user.DefaultInfo{Name: at.User.Name, UID: at.User.UID, Groups: at.User.Groups, Extra: at.User.Extra}
	}
	d, reason, err := a.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: at.Verb, Namespace: at.Namespace, APIGroup: at.APIGroup, APIVersion: at.APIVersion,
		Resource: at.Resource, Subresource: at.Subresource, Name: at.Name, ResourceRequest: at.ResourceRequest, Path: at.Path,
	})
	switch d {
	case authorizer.DecisionAllow:
		return server.DecisionAllow, reason, err
	case authorizer.DecisionDeny:
		return server.DecisionDeny, reason, err
	default:
		return server.DecisionNoOpinion, reason, err
	}
}

// WebSocketStreams is server.WebSocketStreams with k8s.io/apiserver's
// translators, as the kubelet 1.36 (ExtendWebSocketsToKubelet): v5
// WebSocket exec and attach translated to the runtime's SPDY, and
// port-forward's SPDY tunnelled over a WebSocket unwrapped.
type WebSocketStreams struct{}

// StreamTranslator translates a v5 WebSocket stream to SPDY at target.
func (WebSocketStreams) StreamTranslator(target *url.URL, o server.StreamOptions) http.Handler {
	return apiproxy.NewStreamTranslatorHandler(target, nil, 0, apiproxy.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY})
}

// Tunneling unwraps SPDY tunnelled over a WebSocket for upstream.
func (WebSocketStreams) Tunneling(upstream http.Handler) http.Handler {
	return apiproxy.NewTunnelingHandler(upstream)
}
