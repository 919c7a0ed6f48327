package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	cgcert "k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
)

// The rotation schedule: a certificate is renewed at a random point between
// RotationMin and RotationMax of its lifetime (the kubelet's 70-90 %). A
// failed renewal is tried again after RetryMin, doubling up to RetryMax.
// The template (the serving certificate's addresses) is checked every
// TemplateCheckPeriod.
const (
	RotationMin         = 0.7
	RotationMax         = 0.9
	RetryMin            = 2 * time.Second
	RetryMax            = 32 * time.Second
	TemplateCheckPeriod = 10 * time.Second
)

// rotateCertser is the client-go manager's rotation step: a CSR for a new
// key, the wait for its certificate, the store's update. It reports
// whether the certificate changed.
type rotateCertser interface {
	RotateCerts() (bool, error)
}

// rotator renews a client-go certificate manager's certificate on its own
// schedule: client-go's Manager.Start cannot be stopped while it waits for
// the deadline (its wait does not watch Stop), so the wait is here, on an
// injected clock, and the rest is the manager's.
type rotator struct {
	mgr      cgcert.Manager
	rotate   func() (bool, error)
	template func() *x509.CertificateRequest
	clock    clock.WithTicker
	rand     func() float64
	logger   *zap.Logger
	// rotated is called after every change of the certificate.
	rotated func()

	mu       sync.Mutex
	fracOf   *tls.Certificate // the certificate frac was drawn for
	frac     float64
	failures int
}

func newRotator(mgr cgcert.Manager, template func() *x509.CertificateRequest, clk clock.WithTicker, rnd func() float64, logger *zap.Logger, rotated func()) (*rotator, error) {
	r, ok := mgr.(rotateCertser)
	if !ok {
		return nil, fmt.Errorf("certificate: client-go's certificate manager %T has no RotateCerts", mgr)
	}
	return &rotator{mgr: mgr, rotate: r.RotateCerts, template: template, clock: clk, rand: rnd, logger: logger, rotated: rotated}, nil
}

// deadline is when the current certificate is to be renewed: now when
// there is none (or it expired) or it does not satisfy the template, else
// at a random point of RotationMin-RotationMax of its lifetime, drawn once
// per certificate.
func (r *rotator) deadline(now time.Time) time.Time {
	cur := r.mgr.Current()
	if cur == nil || cur.Leaf == nil || !satisfies(cur.Leaf, r.template()) {
		return now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fracOf != cur {
		r.fracOf, r.frac = cur, RotationMin+(RotationMax-RotationMin)*r.rand()
	}
	return Deadline(cur.Leaf, r.frac)
}

// Deadline is the renewal time of cert at fraction frac of its lifetime
// (between RotationMin and RotationMax).
func Deadline(cert *x509.Certificate, frac float64) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(time.Duration(float64(life) * frac))
}

// satisfies reports whether cert has what template asks: its common name,
// and all of its organizations, DNS names and IPs (more is fine).
func satisfies(cert *x509.Certificate, template *x509.CertificateRequest) bool {
	if template == nil {
		return true
	}
	if cert.Subject.CommonName != template.Subject.CommonName {
		return false
	}
	for _, o := range template.Subject.Organization {
		if !slices.Contains(cert.Subject.Organization, o) {
			return false
		}
	}
	for _, n := range template.DNSNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range template.IPAddresses {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// next is how long to wait before the next renewal or template check.
func (r *rotator) next() time.Duration {
	r.mu.Lock()
	failures := r.failures
	r.mu.Unlock()
	if r.template() == nil {
		return TemplateCheckPeriod
	}
	if failures > 0 {
		d := RetryMin << min(failures-1, 4)
		return min(d, RetryMax)
	}
	now := r.clock.Now()
	return min(r.deadline(now).Sub(now), TemplateCheckPeriod)
}

// step renews the certificate when its deadline has come. The manager logs
// why a renewal failed; step counts failures for the retry back-off.
func (r *rotator) step() {
	if now := r.clock.Now(); now.Before(r.deadline(now)) {
		return
	}
	if r.template() == nil {
		return
	}
	old := r.mgr.Current()
	changed, err := r.rotate()
	r.mu.Lock()
	if changed {
		r.failures = 0
	} else {
		r.failures++
	}
	failures := r.failures
	r.mu.Unlock()
	if !changed {
		r.logger.Warn("certificate renewal failed; retrying", zap.Int("failures", failures), zap.Error(err))
		return
	}
	cur := r.mgr.Current()
	if cur != nil && cur.Leaf != nil {
		r.logger.Info("certificate renewed", zap.String("subject", cur.Leaf.Subject.String()),
			zap.Time("notAfter", cur.Leaf.NotAfter), zap.Bool("replaced", old != nil))
	}
	if r.rotated != nil {
		r.rotated()
	}
}

// run renews the certificate until ctx ends; the manager is stopped then
// (which also ends a renewal in progress).
func (r *rotator) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, r.mgr.Stop)
	defer func() {
		stop()
		r.mgr.Stop()
	}()
	for {
		if wait := r.next(); wait > 0 {
			t := r.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		r.step()
	}
}
