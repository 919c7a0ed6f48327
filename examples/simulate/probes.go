package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/prober"
)

// ProbeAnnotationPrefix + "<port>" on a pod scripts the answers of its
// httpGet, tcpSocket and grpc probes on that port (the simulator opens no
// connection; exec probes go to the fake runtime's ExecSync, where `false`
// fails and anything else succeeds):
//
//	success            (the default, also for a pod not found)
//	failure
//	failure-after=D    succeeds until D after the pod's sandbox started, then fails
//	success-after=D    fails until D after the pod's sandbox started, then succeeds
const ProbeAnnotationPrefix = "simulate.nodekit.io/probe-"

// simProbes answers a node's network probes from its pods' annotations.
type simProbes struct {
	rt    *fake.Runtime
	clock clock.PassiveClock
}

var (
	_ prober.HTTPProber = (*simProbes)(nil)
	_ prober.TCPProber  = (*simProbes)(nil)
	_ prober.GRPCProber = (*simProbes)(nil)
)

func (p *simProbes) ProbeHTTP(ctx context.Context, req *http.Request, _ time.Duration) (prober.Result, string, error) {
	port, _ := strconv.Atoi(req.URL.Port())
	return p.answer(ctx, req.URL.Hostname(), port)
}

func (p *simProbes) ProbeTCP(ctx context.Context, host string, port int, _ time.Duration) (prober.Result, string, error) {
	return p.answer(ctx, host, port)
}

func (p *simProbes) ProbeGRPC(ctx context.Context, host string, port int, _ string, _ time.Duration) (prober.Result, string, error) {
	return p.answer(ctx, host, port)
}

// answer finds the ready sandbox with IP host and reads its annotation.
func (p *simProbes) answer(ctx context.Context, host string, port int) (prober.Result, string, error) {
	sbs, err := p.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return prober.Unknown, "", err
	}
	for _, sb := range sbs {
		rule, ok := sb.GetAnnotations()[ProbeAnnotationPrefix+strconv.Itoa(port)]
		if !ok {
			continue
		}
		st, err := p.rt.PodSandboxStatus(ctx, sb.GetId(), false)
		if err != nil || st.GetStatus().GetNetwork().GetIp() != host {
			continue
		}
		started := time.Unix(0, st.GetStatus().GetCreatedAt())
		return probeRule(rule, p.clock.Since(started))
	}
	return prober.Success, "", nil
}

// probeRule applies one annotation value at age (time since the sandbox
// was created).
func probeRule(rule string, age time.Duration) (prober.Result, string, error) {
	kind, after, _ := strings.Cut(strings.TrimSpace(rule), "=")
	d, err := time.ParseDuration(after)
	if after != "" && err != nil {
		return prober.Failure, "simulated: bad duration in " + rule, nil
	}
	switch kind {
	case "success":
		return prober.Success, "", nil
	case "failure":
		return prober.Failure, "simulated failure", nil
	case "failure-after":
		if age >= d {
			return prober.Failure, "simulated failure after " + after, nil
		}
		return prober.Success, "", nil
	case "success-after":
		if age >= d {
			return prober.Success, "", nil
		}
		return prober.Failure, "simulated failure until " + after, nil
	}
	return prober.Failure, "simulated: unknown rule " + rule, nil
}
