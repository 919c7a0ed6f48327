// Package prober runs the liveness, readiness and startup probes of pod
// containers, as the kubelet's prober does.
//
// A Manager keeps one worker goroutine per (pod, container, probe type).
// The sync loop calls AddPod on every sync of a pod, StopLivenessAndStartup
// when the pod starts terminating and RemovePod once it stopped. A worker
// reads the pod's API status (Config.Status, the sync loop's status
// manager) to find the container's current instance, runs the probe every
// periodSeconds and records a result once it has repeated
// successThreshold (failureThreshold) times.
//
//	m, err := prober.New(prober.Config{Status: loop.StatusManager(), Exec: cri})
//	go m.Run(ctx)                           // workers run while ctx lives
//	for u := range m.Updates() { ... }      // result changes, to the sync loop
//	runtimeCfg.Probes = m.RuntimeResults()  // restart on liveness/startup failure
//	loopCfg.ProbeState = m.StatusResults()  // Ready and Started in the status
//
// nodekit's Builder does all of this with WithProber().
//
// # Semantics
//
//   - Probe kinds: exec (the CRI's ExecSync with the probe's timeout; exit 0
//     is Success, another exit code or a timeout Failure; output capped at
//     MaxOutput), httpGet (2xx/3xx Success; redirects followed only to the
//     same host, another host's redirect is a Success with a warning; body
//     read capped at MaxOutput), tcpSocket (a connection within the
//     timeout) and grpc (grpc.health.v1 Check of the service; SERVING is
//     Success). The default host is the pod's IP; for a host-network pod
//     without one, the host IP, else 127.0.0.1. Each kind is an interface
//     (ExecProber, HTTPProber, TCPProber, GRPCProber) that tests replace.
//   - A probe that cannot be run (an error rather than a failure: the exec
//     call failed, a named port does not exist) is tried 3 times and then
//     ignored for this period: it counts neither as success nor failure.
//   - Defaults of fields left zero: periodSeconds 10, timeoutSeconds 1,
//     successThreshold 1, failureThreshold 3, initialDelaySeconds 0.
//   - A worker started within one period of Run first waits a random part
//     of the period (Config.Jitter), so that probes spread out.
//   - A new container instance starts with readiness Failure, liveness
//     Success and startup Unknown. Liveness and readiness probes run only
//     once the container started (its startup probe succeeded, or it has
//     none); the startup probe stops once it has.
//   - After a liveness Failure or any startup result the worker holds until
//     the container ID changes (the runtime restarts the container).
//   - A container that is not running reads as Failure; the worker exits
//     when the container will not be restarted or the pod is terminal.
//   - A pod with a deletion timestamp gets liveness and startup Success (so
//     nothing restarts while it shuts down) and those workers exit.
//   - Updates carries a result only when it changed (the first result of an
//     instance included). It must be drained.
//
// Results are keyed by container instance: RuntimeResults takes the CRI id,
// StatusResults the API ID ("<runtime>://<id>"); Result takes either.
//
// # Not done
//
// The kubelet's grace for containers that were running before it
// restarted (it keeps their readiness instead of resetting it to Failure)
// is not reproduced: after an agent restart, readiness starts at Failure.
// No events are recorded; outputs of failed probes are logged at debug
// level.
package prober
