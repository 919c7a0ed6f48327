// Package runtimetest is one test suite for what nodekit needs from a CRI
// runtime, run against every implementation: runtime/fake in process, the
// fake served over a unix socket and reached through runtime/remote, and (with
// -tags e2e) a real containerd.
//
// It has two parts:
//
//   - RunConformance checks the CRI calls kuberuntime.Manager relies on: sandbox
//     and container life cycles, label filters, exit codes, stop time-outs,
//     image status of a missing image, ExecSync exit codes.
//   - RunScenarios drives pods through kuberuntime.Manager: init containers before
//     app containers, OnFailure restarts with back-off, Never, SIGTERM handled
//     versus ignored, imagePullPolicy Never with a missing image.
//
// An implementation is described by an Endpoint, made fresh for each test:
//
//	runtimetest.RunScenarios(t, func(t *testing.T) *runtimetest.Endpoint {
//		fc := clocktesting.NewFakeClock(start)
//		rt, _ := fake.New(fake.Config{Clock: fc})
//		return &runtimetest.Endpoint{Runtime: rt, Images: rt, Clock: fc,
//			Step: fc.Step, Settle: ..., PauseImage: "pause", BusyboxImage: "busybox"}
//	})
//
// The same pod specs mean the same thing on every implementation: busybox
// commands (`sleep`, `sh -c 'exit N'`, `trap ... TERM`) that the fake runtime
// interprets the way a real container behaves.
//
// # Running one pod without the agent
//
// RunPod puts a *v1.Pod on any CRI runtime (usually the fake) the way the
// agent would: a sandbox and containers with the io.kubernetes.* labels and
// annotations the engine writes, init containers first. Tests of one part
// (a PLEG relisting the fake, a prober, a status manager) use it instead of
// raw CRI calls with hand-made labels:
//
//	rt, _ := fake.New(fake.Config{Clock: fc})
//	st, err := runtimetest.RunPod(ctx, rt, pod, runtimetest.RunPodOptions{Clock: fc})
//	// st.SandboxStatuses[0].Id, st.ContainerStatuses[i].ID ...
//
// It lives here, not in the fake, because it uses kuberuntime, which the
// fake must not import (kuberuntime's own tests use the fake).
package runtimetest
