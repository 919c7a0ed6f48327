package prober

import (
	"context"
	"crypto/tls"

	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// UserAgent is the User-Agent of HTTP probes that set none (the kubelet's
// form, so servers that recognise probes keep doing so).
const UserAgent = "kube-probe/1.36"

// maxRedirects bounds the redirects an HTTP probe follows.
const maxRedirects = 10

// HTTPProber runs httpGet probes.
type HTTPProber interface {
	ProbeHTTP(ctx context.Context, req *http.Request, timeout time.Duration) (Result, string, error)
}

// httpProber is the default HTTPProber.
type httpProber struct{ transport *http.Transport }

// NewHTTPProber returns the default HTTPProber: no keep-alives, no proxy,
// no compression, TLS without verification (as the kubelet). A 2xx or 3xx
// status is Success; redirects are followed only to the same host, another
// host's redirect ends the probe as a Success with a warning; other
// statuses and transport errors are Failure. At most MaxOutput bytes of the
// body are read.
func NewHTTPProber() HTTPProber {
	return &httpProber{transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes never verify, as the kubelet's
		DisableKeepAlives:   true,
		DisableCompression:  true,
		Proxy:               nil,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext:         (&net.Dialer{KeepAlive: -1}).DialContext,
	}}
}

// redirectWarning prefixes the output of a probe whose redirect was not
// followed.
const redirectWarning = "Probe terminated redirects"

func (p *httpProber) ProbeHTTP(ctx context.Context, req *http.Request, timeout time.Duration) (Result, string, error) {
	client := &http.Client{
		Timeout:   timeout,
		Transport: p.transport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if r.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
	res, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxOutput))
	if err != nil {
		return Failure, "", err
	}
	if res.StatusCode >= 200 && res.StatusCode < 400 {
		if res.StatusCode >= 300 {
			return Success, redirectWarning + ", Response body: " + string(body), nil
		}
		return Success, string(body), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// newHTTPRequest builds the GET of an httpGet probe: scheme (default
// http), host (default host), port (number or the container's port name),
// path, headers (a Host header sets the request's host; an empty Accept
// header removes the default "*/*").
func newHTTPRequest(a *v1.HTTPGetAction, c *v1.Container, host string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("%w: httpGet scheme %q", ErrBadProbe, a.Scheme)
	}
	if a.Host != "" {
		host = a.Host
	}
	port, err := resolvePort(a.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: httpGet: %w", ErrBadProbe, err)
	}
	h := make(http.Header, len(a.HTTPHeaders)+2)
	for _, x := range a.HTTPHeaders {
		h.Add(x.Name, x.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", UserAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	req.Header = h
	req.Host = h.Get("Host")
	return req, nil
}
