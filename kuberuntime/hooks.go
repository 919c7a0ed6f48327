package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxHookBody caps how much of an httpGet hook's response is read.
const maxHookBody = 10 << 10

// errHookUnsupported: a hook handler of a kind nodekit does not run.
var errHookUnsupported = errors.New("lifecycle handler has no supported action")

// runHook runs one lifecycle handler of a container within timeout and
// returns a message describing a failure.
func (m *Manager) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, podIPs []string, h *v1.LifecycleHandler, timeout time.Duration) error {
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			return fmt.Errorf("exec hook of container %s has no command", c.Name)
		}
		stdout, stderr, err := m.cfg.Runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			out := strings.TrimSpace(string(stdout) + string(stderr))
			if len(out) > 1024 {
				out = out[:1024]
			}
			return fmt.Errorf("exec %v: %w (output: %q)", h.Exec.Command, err, out)
		}
		return nil
	case h.HTTPGet != nil:
		return m.runHTTPHook(ctx, pod, c, podIPs, h.HTTPGet)
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		if d <= 0 {
			return nil
		}
		select {
		case <-m.cfg.Clock.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("container %s: %w", c.Name, errHookUnsupported)
}

func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d out of range", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no port named %q in container %s", p.StrVal, c.Name)
}

func (m *Manager) runHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		if len(podIPs) == 0 {
			return fmt.Errorf("httpGet hook of container %s: pod has no IP", c.Name)
		}
		host = podIPs[0]
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return fmt.Errorf("httpGet hook: %w", err)
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return fmt.Errorf("httpGet hook: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("httpGet hook: %w", err)
	}
	req.Header.Set("User-Agent", "nodekit-lifecycle/1")
	for _, hh := range g.HTTPHeaders {
		if strings.EqualFold(hh.Name, "host") {
			req.Host = hh.Value
			continue
		}
		req.Header.Add(hh.Name, hh.Value)
	}
	resp, err := m.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("httpGet hook %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxHookBody))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("httpGet hook %s: status %d: %q", u, resp.StatusCode, string(body))
	}
	return nil
}
