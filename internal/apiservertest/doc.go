// Package apiservertest holds what the programs that drive many pods
// through a real kube-apiserver share (the examples/simulate e2e test and
// hack/simbench): a PodWatch that follows one namespace's pods through an
// informer and records, per pod, when it was asked for, when it was first
// seen Running, when its deletion was asked for, its last terminated
// container state and when it went.
//
//	w := apiservertest.WatchPods(ctx, client, ns, clock.RealClock{})
//	defer w.Stop()
//	// poll w.HasSynced, then for each pod:
//	w.Creating(name) // just before the create request
//	// ... poll w.Running() ...
//	lat := w.RunningLatencies() // create request to first seen Running, sorted
package apiservertest
