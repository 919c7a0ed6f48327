package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	cgcert "k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// ServingConfig configures a Serving certificate.
type ServingConfig struct {
	// NodeName is the node's name (required).
	NodeName string
	// Client asks for the certificates, with the node's credential
	// (required).
	Client kubernetes.Interface
	// CertDir holds the pairs (required; made 0700):
	// kubelet-server-<time>.pem and the link kubelet-server-current.pem.
	CertDir string
	// Addresses are the node's addresses (required), read before every
	// request: their IPs and host names are the certificate's subject
	// alternative names, and a change of them renews the certificate.
	// Nothing is asked for while they hold no IP.
	Addresses func() []v1.NodeAddress
	// RequestedLifetime, when set, is asked for as spec.expirationSeconds.
	RequestedLifetime time.Duration
	Clock             clock.WithTicker
	Rand              func() float64
	Logger            *zap.Logger
}

// Serving is the node's serving certificate issued through
// kubernetes.io/kubelet-serving CSRs (the kubelet's serverTLSBootstrap and
// --rotate-server-certificates): Run asks for one and renews it;
// GetCertificate gives it to a TLS server (tls.Config.GetCertificate, so a
// renewed certificate is served from the next handshake on).
type Serving struct {
	cfg  ServingConfig
	once lifecycle.Once
	mgr  atomic.Pointer[cgcert.Manager]
}

// NewServing validates cfg; it starts nothing and touches no file.
func NewServing(cfg ServingConfig) (*Serving, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	case cfg.CertDir == "":
		return nil, fmt.Errorf("%w: CertDir is required", ErrInvalidConfig)
	case cfg.Addresses == nil:
		return nil, fmt.Errorf("%w: Addresses is required", ErrInvalidConfig)
	case cfg.RequestedLifetime < 0 || (cfg.RequestedLifetime > 0 && cfg.RequestedLifetime < 10*time.Minute):
		return nil, fmt.Errorf("%w: RequestedLifetime %v: 0 or at least 10m (the API server's minimum)", ErrInvalidConfig, cfg.RequestedLifetime)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Logger = cfg.Logger.Named("serving-certificate")
	return &Serving{cfg: cfg}, nil
}

func (s *Serving) template() *x509.CertificateRequest {
	return ServingTemplate(s.cfg.NodeName, s.cfg.Addresses())
}

// Current is the serving certificate: nil before Run has read the store,
// before the first one is issued, or when it expired.
func (s *Serving) Current() *tls.Certificate {
	if m := s.mgr.Load(); m != nil {
		return (*m).Current()
	}
	return nil
}

// GetCertificate is tls.Config.GetCertificate: the current serving
// certificate, or ErrNoServingCertificate (the handshake fails, as the
// kubelet's does before its first serving certificate).
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.Current(); c != nil {
		return c, nil
	}
	return nil, ErrNoServingCertificate
}

// Run reads the stored pair (a valid one is served at once), then asks for
// a serving certificate when there is none, it expired or it lacks one of
// the node's addresses, and renews it at a random 70-90 % of its lifetime,
// until ctx ends. It follows the lifecycle contract.
func (s *Serving) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	if err := ensureDir(s.cfg.CertDir); err != nil {
		return err
	}
	log := zapr.NewLogger(s.cfg.Logger)
	store, err := cgcert.NewFileStoreWithLogger(log.V(2), ServingPairName, s.cfg.CertDir, s.cfg.CertDir, "", "")
	if err != nil {
		return fmt.Errorf("certificate: serving certificate store: %w", err)
	}
	var lifetime *time.Duration
	if s.cfg.RequestedLifetime > 0 {
		lifetime = &s.cfg.RequestedLifetime
	}
	mctx := logr.NewContext(context.WithoutCancel(ctx), log)
	mgr, err := cgcert.NewManager(&cgcert.Config{
		Name:                         ServingPairName,
		GetTemplate:                  s.template,
		SignerName:                   ServingSignerName,
		GetUsages:                    cgcert.DefaultKubeletServingGetUsages,
		RequestedCertificateLifetime: lifetime,
		CertificateStore:             store,
		Ctx:                          &mctx,
		ClientsetFn:                  func(*tls.Certificate) (kubernetes.Interface, error) { return s.cfg.Client, nil },
	})
	if err != nil {
		return fmt.Errorf("certificate: serving certificate manager: %w", err)
	}
	rot, err := newRotator(mgr, s.template, s.cfg.Clock, s.cfg.Rand, s.cfg.Logger, nil)
	if err != nil {
		return err
	}
	s.mgr.Store(&mgr)
	return rot.run(ctx)
}
