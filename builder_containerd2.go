package nodekit

import "github.com/nodekit/nodekit/kuberuntime/remote"

// WithRelistPLEG makes the agent relist the runtime with a pleg.GenericPLEG
// only, never following its container events. Without it (and without
// WithEventedPLEG) a runtime reached over the CRI (WithRuntimeEndpoint, or a
// *remote.Client given to WithRuntime) is followed with a pleg.EventedPLEG,
// as the kubelet's EventedPLEG does: on containerd 2.x, which streams
// container events, the relist runs only every
// pleg.DefaultEventedRelistPeriod as a safety net; on a runtime without
// them (containerd 1.6 answers Unimplemented) the EventedPLEG falls back at
// once to relisting every pleg.DefaultRelistPeriod. Other runtimes (the
// fake, a custom CRI) relist unless WithEventedPLEG is given.
func (b *Builder) WithRelistPLEG() *Builder { b.relistPLEG = true; return b }

// wantEventedPLEG tells Build whether to follow the runtime's container
// events: WithEventedPLEG, else by default for a remote CRI runtime.
func (b *settings) wantEventedPLEG(cri CRI) bool {
	switch {
	case b.eventedPLEG:
		return true
	case b.relistPLEG:
		return false
	}
	_, isRemote := cri.(*remote.Client)
	return isRemote
}
