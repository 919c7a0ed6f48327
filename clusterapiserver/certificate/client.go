package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cgcert "k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// PendingKeyFile keeps, in the cert dir, the key of a client CSR that is
// not issued yet, so that a restart asks again with the same key (and so
// finds the same CSR); removed once the certificate is stored.
const PendingKeyFile = "kubelet-client.key.tmp"

// DefaultKubeconfigName is the kubeconfig Bootstrap writes in the cert dir
// when ClientConfig.Kubeconfig is empty.
const DefaultKubeconfigName = "kubelet.kubeconfig"

// DefaultWaitTimeout bounds Bootstrap's wait for its CSR to be issued (the
// kubelet's hour).
const DefaultWaitTimeout = time.Hour

// ClientConfig configures a Client.
type ClientConfig struct {
	// NodeName is the node's name (required): the certificate's subject is
	// CN system:node:<NodeName>, O system:nodes.
	NodeName string
	// CertDir holds the certificate and key pairs (required; made 0700).
	CertDir string
	// Kubeconfig is the node's kubeconfig (the kubelet's --kubeconfig).
	// When it holds a client certificate that has not expired, Bootstrap
	// uses it; else, with BootstrapKubeconfig, Bootstrap asks for a
	// certificate and (re)writes it to point at the pair in CertDir.
	// Empty: CertDir/kubelet.kubeconfig.
	Kubeconfig string
	// BootstrapKubeconfig is the bootstrap credential (the kubelet's
	// --bootstrap-kubeconfig; e.g. a bootstrap token in system:bootstrappers):
	// used only to ask for the node's client certificate.
	BootstrapKubeconfig string
	// Rotate renews the client certificate before it expires (the
	// kubelet's --rotate-certificates): Run does it, and the rest config
	// Bootstrap returns always presents the current certificate and drops
	// its connections when it changes.
	Rotate bool
	// RequestedLifetime, when set, is asked for as the CSR's
	// spec.expirationSeconds (the signer may give less).
	RequestedLifetime time.Duration
	// WaitTimeout bounds Bootstrap's wait for its certificate (default
	// DefaultWaitTimeout).
	WaitTimeout time.Duration
	// NewClientset makes the client of a rest config (default
	// kubernetes.NewForConfig); tests give a fake.
	NewClientset func(*rest.Config) (kubernetes.Interface, error)
	// Clock drives the rotation schedule (default real). Rand returns a
	// number in [0,1) for the point of the lifetime a certificate is
	// renewed at (default math/rand/v2).
	Clock  clock.WithTicker
	Rand   func() float64
	Logger *zap.Logger
}

// Client is the node's client certificate: TLS bootstrap (Bootstrap) and
// rotation (Run). See the package documentation.
type Client struct {
	cfg  ClientConfig
	once lifecycle.Once
	// bootMu makes Bootstrap calls one at a time; mu guards the fields
	// below.
	bootMu sync.Mutex

	mu     sync.Mutex
	done   bool
	mgr    cgcert.Manager
	rot    *rotator
	dialer *connrotation.Dialer
	// bootDialer makes the bootstrap credential's connections.
	bootDialer *connrotation.Dialer
	restCfg    *rest.Config
	bootstrap  *rest.Config
	// dial is the dialer's underlying dial (tests replace it).
	dial connrotation.DialFunc
}

// NewClient validates cfg and fills its defaults; it starts nothing and
// touches no file.
func NewClient(cfg ClientConfig) (*Client, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case cfg.CertDir == "":
		return nil, fmt.Errorf("%w: CertDir is required", ErrInvalidConfig)
	case cfg.RequestedLifetime < 0 || (cfg.RequestedLifetime > 0 && cfg.RequestedLifetime < 10*time.Minute):
		return nil, fmt.Errorf("%w: RequestedLifetime %v: 0 or at least 10m (the API server's minimum)", ErrInvalidConfig, cfg.RequestedLifetime)
	case cfg.WaitTimeout < 0:
		return nil, fmt.Errorf("%w: WaitTimeout %v is negative", ErrInvalidConfig, cfg.WaitTimeout)
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = filepath.Join(cfg.CertDir, DefaultKubeconfigName)
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.NewClientset == nil {
		cfg.NewClientset = func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }
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
	cfg.Logger = cfg.Logger.Named("client-certificate")
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &Client{cfg: cfg, dial: d.DialContext}, nil
}

// Bootstrap returns the rest config the node talks to the API server with.
// When the kubeconfig holds a client certificate that has not expired, it
// is that; else, with a bootstrap kubeconfig, Bootstrap makes an ECDSA
// P-256 key, submits a CSR for signer kubernetes.io/kube-apiserver-client-kubelet
// through the bootstrap credential, waits (a watch) until it is issued,
// stores the pair in the cert dir (kubelet-client-<time>.pem, 0600, and the
// symbolic link kubelet-client-current.pem), writes the kubeconfig
// pointing at it (atomically, 0600) and uses it. A denied or failed CSR is
// ErrDenied or ErrFailed; ctx bounds the wait. With Rotate the returned
// config presents the manager's current certificate on every new
// connection. Bootstrap succeeds at most once.
func (c *Client) Bootstrap(ctx context.Context) (*rest.Config, error) {
	c.bootMu.Lock()
	defer c.bootMu.Unlock()
	c.mu.Lock()
	done, restCfg := c.done, c.restCfg
	c.mu.Unlock()
	if done {
		return rest.CopyConfig(restCfg), nil
	}
	if err := ensureDir(c.cfg.CertDir); err != nil {
		return nil, err
	}
	var bootCfg *rest.Config
	if c.cfg.BootstrapKubeconfig != "" {
		var err error
		if bootCfg, err = loadKubeconfig(c.cfg.BootstrapKubeconfig); err != nil {
			return nil, fmt.Errorf("certificate: bootstrap kubeconfig: %w", err)
		}
		// Its own connections (not client-go's shared transports), closed
		// once it is done with.
		bootDialer := connrotation.NewDialer(c.dial)
		bootCfg.Dial = bootDialer.DialContext
		c.mu.Lock()
		c.bootstrap, c.bootDialer = bootCfg, bootDialer
		c.mu.Unlock()
	}
	valid, why := c.kubeconfigValid()
	switch {
	case !valid && bootCfg != nil:
		c.cfg.Logger.Info("requesting a client certificate with the bootstrap credential", zap.String("reason", why))
		if err := c.requestClientCert(ctx, bootCfg); err != nil {
			return nil, err
		}
	case !valid && c.cfg.Rotate:
		return nil, fmt.Errorf("%w: Rotate needs a valid client certificate in %s or a BootstrapKubeconfig (%s)", ErrInvalidConfig, c.cfg.Kubeconfig, why)
	}
	userCfg, err := loadKubeconfig(c.cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("certificate: kubeconfig: %w", err)
	}
	if c.cfg.Rotate {
		if userCfg, err = c.startRotation(ctx, userCfg); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.restCfg, c.done = userCfg, true
	c.mu.Unlock()
	return rest.CopyConfig(userCfg), nil
}

// kubeconfigValid reports whether the kubeconfig holds a client
// certificate and key that go together and have not expired, and if not
// why.
func (c *Client) kubeconfigValid() (bool, string) {
	if _, err := os.Stat(c.cfg.Kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return false, "no kubeconfig at " + c.cfg.Kubeconfig
	}
	cfg, err := loadKubeconfig(c.cfg.Kubeconfig)
	if err != nil {
		return false, err.Error()
	}
	cert, err := clientPair(cfg)
	if err != nil {
		return false, err.Error()
	}
	if now := c.cfg.Clock.Now(); now.After(cert.Leaf.NotAfter) {
		return false, fmt.Sprintf("the client certificate expired at %s", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// clientPair reads the client certificate and key of a rest config.
func clientPair(cfg *rest.Config) (*tls.Certificate, error) {
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	var err error
	if len(certPEM) == 0 && cfg.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, fmt.Errorf("reading the client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 && cfg.KeyFile != "" {
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("reading the client key: %w", err)
		}
	}
	if len(certPEM) == 0 {
		return nil, errors.New("the kubeconfig has no client certificate")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the client certificate and key: %w", err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("the client certificate: %w", err)
		}
	}
	return &pair, nil
}

func loadKubeconfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}

// klogr is the logger given to client-go's certificate code.
func (c *Client) klogr() logr.Logger { return zapr.NewLogger(c.cfg.Logger) }

func (c *Client) store(certFile, keyFile string) (cgcert.FileStore, error) {
	s, err := cgcert.NewFileStoreWithLogger(c.klogr().V(2), ClientPairName, c.cfg.CertDir, c.cfg.CertDir, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: client certificate store: %w", err)
	}
	return s, nil
}

// requestClientCert is the TLS bootstrap (see Bootstrap).
func (c *Client) requestClientCert(ctx context.Context, bootCfg *rest.Config) error {
	client, err := c.cfg.NewClientset(bootCfg)
	if err != nil {
		return fmt.Errorf("certificate: bootstrap client: %w", err)
	}
	// The bootstrap credential is done with after this: none of its
	// connections is kept (a watch's included).
	c.mu.Lock()
	defer c.bootDialer.CloseAll()
	c.mu.Unlock()
	store, err := c.store("", "")
	if err != nil {
		return err
	}
	// The pending key of an earlier try is reused (its CSR may be waiting),
	// never the stored pair's: that one may have expired, and its CSR with
	// it.
	pending := filepath.Join(c.cfg.CertDir, PendingKeyFile)
	keyPEM, key, err := loadOrGenerateKey(pending)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, c.cfg.WaitTimeout)
	defer cancel()
	var lifetime *time.Duration
	if c.cfg.RequestedLifetime > 0 {
		lifetime = &c.cfg.RequestedLifetime
	}
	certPEM, err := request(logr.NewContext(waitCtx, c.klogr()), client, key, keyPEM, ClientTemplate(c.cfg.NodeName), ClientSignerName, ClientUsages(key), lifetime)
	if err != nil {
		return err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("certificate: storing the client certificate: %w", err)
	}
	if err := os.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.cfg.Logger.Warn("could not remove the pending key file", zap.String("path", pending), zap.Error(err))
	}
	info := clusterInfo{server: bootCfg.Host, caFile: bootCfg.CAFile, caData: bootCfg.CAData, insecure: bootCfg.Insecure, tlsName: bootCfg.ServerName}
	if err := writeKubeconfig(c.cfg.Kubeconfig, info, store.CurrentPath()); err != nil {
		return err
	}
	c.cfg.Logger.Info("client certificate issued", zap.String("kubeconfig", c.cfg.Kubeconfig), zap.String("pair", store.CurrentPath()))
	return nil
}

// startRotation makes the client-go certificate manager over the cert
// dir's store and the rest config that presents its current certificate.
func (c *Client) startRotation(ctx context.Context, userCfg *rest.Config) (*rest.Config, error) {
	store, err := c.store(userCfg.CertFile, userCfg.KeyFile)
	if err != nil {
		return nil, err
	}
	rotating, dialer, err := c.rotatingConfig(userCfg)
	if err != nil {
		return nil, err
	}
	var lifetime *time.Duration
	if c.cfg.RequestedLifetime > 0 {
		lifetime = &c.cfg.RequestedLifetime
	}
	// The manager's logger; its context never ends (Run stops it).
	mctx := logr.NewContext(context.WithoutCancel(ctx), c.klogr())
	mgr, err := cgcert.NewManager(&cgcert.Config{
		Name:                         ClientPairName,
		Template:                     ClientTemplate(c.cfg.NodeName),
		SignerName:                   ClientSignerName,
		GetUsages:                    cgcert.DefaultKubeletClientGetUsages,
		RequestedCertificateLifetime: lifetime,
		CertificateStore:             store,
		BootstrapCertificatePEM:      userCfg.CertData,
		BootstrapKeyPEM:              userCfg.KeyData,
		Ctx:                          &mctx,
		// A CSR is asked for with the current certificate, or with the
		// bootstrap credential when there is none (or it expired).
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			c.mu.Lock()
			boot, bootDialer := c.bootstrap, c.bootDialer
			c.mu.Unlock()
			if current == nil && boot != nil {
				// The last try's connections go first: each try makes
				// a client of its own.
				bootDialer.CloseAll()
				return c.cfg.NewClientset(boot)
			}
			return c.cfg.NewClientset(rest.CopyConfig(rotating))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("certificate: client certificate manager: %w", err)
	}
	rot, err := newRotator(mgr, func() *x509.CertificateRequest { return ClientTemplate(c.cfg.NodeName) },
		c.cfg.Clock, c.cfg.Rand, c.cfg.Logger, dialer.CloseAll)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mgr, c.rot, c.dialer = mgr, rot, dialer
	c.mu.Unlock()
	return rotating, nil
}

// rotatingConfig is base without its credential, presenting the manager's
// current certificate on every TLS handshake, through a dialer whose
// connections are all closed when the certificate changes (so no
// connection keeps the old one).
func (c *Client) rotatingConfig(base *rest.Config) (*rest.Config, *connrotation.Dialer, error) {
	cfg := rest.AnonymousClientConfig(base)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: TLS config: %w", err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsCfg.Certificates = nil
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cur := c.Current(); cur != nil {
			return cur, nil
		}
		return &tls.Certificate{}, nil
	}
	dialer := connrotation.NewDialer(c.dial)
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialer.DialContext,
	})
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Dial = nil
	return cfg, dialer, nil
}

// Current is the client certificate in use: nil before Bootstrap, without
// Rotate, or when it expired.
func (c *Client) Current() *tls.Certificate {
	c.mu.Lock()
	mgr := c.mgr
	c.mu.Unlock()
	if mgr == nil {
		return nil
	}
	return mgr.Current()
}

// CloseConnections closes every connection of the rotating rest config
// (nothing without Rotate) and of the bootstrap credential: after the
// agent stopped, so that no idle connection outlives it.
func (c *Client) CloseConnections() {
	c.mu.Lock()
	d, b := c.dialer, c.bootDialer
	c.mu.Unlock()
	for _, x := range []*connrotation.Dialer{d, b} {
		if x != nil {
			x.CloseAll()
		}
	}
}

// Run renews the client certificate until ctx ends (with Rotate; without,
// it only waits): a CSR for a new key at a random 70-90 % of the current
// certificate's lifetime (at once when it has none or it expired, through
// the bootstrap credential then), retried with back-off; every connection
// is closed when the certificate changes. It follows the lifecycle
// contract; Bootstrap must have succeeded (ErrNotBootstrapped).
func (c *Client) Run(ctx context.Context) error {
	if err := c.once.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	done, rot := c.done, c.rot
	c.mu.Unlock()
	if !done {
		return ErrNotBootstrapped
	}
	if rot == nil {
		<-ctx.Done()
		return nil
	}
	return rot.run(ctx)
}
