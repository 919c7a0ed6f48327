// Package server is the node agent's HTTPS API, the kubelet's port 10250:
// what `kubectl logs`, `exec`, `attach`, `port-forward`, metrics-server and
// the API server's node proxy talk to, with the kubelet's paths,
// parameters, answers and authorization.
//
// Routes:
//
//	/healthz (+ /ping, /log, /syncloop, /pleg)   health; also on the plain-HTTP localhost port (10248)
//	/pods, /runningpods/, /configz               the agent's pods, the runtime's, the configuration
//	/metrics, /metrics/probes                    the agent's registry, its prober families
//	/metrics/resource, /stats/summary            from a StatsProvider / collector (404 without)
//	/containerLogs/{ns}/{pod}/{container}        follow, previous, tailLines, limitBytes, sinceSeconds, sinceTime, timestamps
//	/exec, /attach/{ns}/{pod}[/{uid}]/{container}, /portForward/{ns}/{pod}[/{uid}]
//	                                             the CRI's streaming URL, proxied (SPDY and WebSocket)
//	/run/{ns}/{pod}[/{uid}]/{container}?cmd=     CRI ExecSync, output returned
//
// Every request on the API port is authenticated (an Authenticator: x509
// client certificates verified against ClientCA here; bearer tokens through
// TokenReview in server/apiserver), refused 401 without credentials unless
// Anonymous is set, and authorized with the kubelet's attributes
// (RequestAttributes: resource nodes, the node's name, subresource stats,
// metrics, log, pods, healthz, configz or proxy): 403 unless one is
// allowed, 500 when the authorizer fails.
//
// Streams: the CRI's Exec, Attach and PortForward return a URL on the
// runtime's streaming server; the upgraded connection is proxied to it
// with apimachinery's upgrade-aware proxy, whatever the protocol (SPDY or
// WebSocket). WebSocketStreams, when set, translates the v5 WebSocket
// protocol and tunnelled port-forward as the kubelet 1.36 does. Streams
// close after StreamingIdleTimeout (4 h) without traffic; at most
// MaxStreams are open (429 beyond); preparing one is bounded by
// StreamCreationTimeout.
//
// Wiring (agentserver.Wire does this for a nodekit Agent):
//
//	srv, err := server.New(server.Config{
//		NodeName: "node1", Pods: agent, RuntimePods: agent.Runtime(),
//		Streaming: cri, Runner: cri, Logs: logs,
//		ClientCA: pool, Authorizer: authz, CertDir: "/var/lib/nodekit/pki",
//		HealthzPort: server.DefaultHealthzPort,
//	})
//	go srv.Run(ctx)
//
// Without TLSCertFile the serving pair is self-signed once and kept in
// CertDir (kubelet.crt, kubelet.key), as the kubelet does without
// --tls-cert-file. Nothing sensitive is logged: no headers, tokens or
// bodies.
package server
