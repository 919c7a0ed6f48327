package prober

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxRetries is how often a probe that errored (could not be run, as
// opposed to failed) is tried in one period.
const maxRetries = 3

// probers are the four probe kinds.
type probers struct {
	exec ExecProber
	http HTTPProber
	tcp  TCPProber
	grpc GRPCProber
}

// runWithRetries runs p up to maxRetries times while it errors.
func (ps *probers) runWithRetries(ctx context.Context, p *v1.Probe, pod *v1.Pod, status *v1.PodStatus, c *v1.Container, containerID string) (res Result, out string, err error) {
	for range maxRetries {
		res, out, err = ps.run(ctx, p, pod, status, c, containerID)
		if err == nil || ctx.Err() != nil {
			return res, out, err
		}
	}
	return res, out, err
}

// run runs one probe of container c (instance containerID) of pod.
func (ps *probers) run(ctx context.Context, p *v1.Probe, pod *v1.Pod, status *v1.PodStatus, c *v1.Container, containerID string) (Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.Exec != nil:
		return ps.exec.ProbeExec(ctx, containerID, expandCommand(p.Exec.Command, c.Env), timeout)
	case p.HTTPGet != nil:
		req, err := newHTTPRequest(p.HTTPGet, c, probeHost(pod, status))
		if err != nil {
			return Unknown, "", err
		}
		return ps.http.ProbeHTTP(ctx, req, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return Unknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = probeHost(pod, status)
		}
		return ps.tcp.ProbeTCP(ctx, host, port, timeout)
	case p.GRPC != nil:
		if p.GRPC.Port < 1 || p.GRPC.Port > 65535 {
			return Unknown, "", fmt.Errorf("%w: grpc port %d out of range", ErrBadProbe, p.GRPC.Port)
		}
		svc := ""
		if p.GRPC.Service != nil {
			svc = *p.GRPC.Service
		}
		return ps.grpc.ProbeGRPC(ctx, probeHost(pod, status), int(p.GRPC.Port), svc, timeout)
	}
	return Unknown, "", fmt.Errorf("%w: container %q: the probe has no handler", ErrBadProbe, c.Name)
}

// probeHost is the address probes go to by default: the pod's IP; for a
// host-network pod without one, the host's IP, else the loopback address.
func probeHost(pod *v1.Pod, status *v1.PodStatus) string {
	if status.PodIP != "" {
		return status.PodIP
	}
	if pod.Spec.HostNetwork {
		if status.HostIP != "" {
			return status.HostIP
		}
		return "127.0.0.1"
	}
	return ""
}

// resolvePort turns a probe port (a number, or the name of one of the
// container's ports) into a port number in 1..65535.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port = int(cp.ContainerPort)
				break
			}
		}
		if port == -1 {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return 0, fmt.Errorf("%w: container %q has no port named %q", ErrBadProbe, c.Name, p.StrVal)
			}
			port = n
		}
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("%w: port %s of container %q out of range", ErrBadProbe, p.String(), c.Name)
	}
	return port, nil
}

// expandCommand replaces $(NAME) in cmd by the value of the container's
// env var NAME when it is a literal value; $$ is a literal $; unknown
// references stay as written.
func expandCommand(cmd []string, env []v1.EnvVar) []string {
	need := false
	for _, s := range cmd {
		if strings.Contains(s, "$") {
			need = true
			break
		}
	}
	if !need {
		return cmd
	}
	vals := make(map[string]string, len(env))
	for _, e := range env {
		if e.ValueFrom == nil {
			vals[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = expand(s, vals)
	}
	return out
}

func expand(s string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vals[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
