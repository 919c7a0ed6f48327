package nodekit

// WithNodeReadyCheck adds a check of the node's Ready condition: while
// check returns an error the node status that reads the Agent's checks
// (clusterapiserver.Wire's) reports Ready False, reason KubeletNotReady,
// with the error's text as the message, as the kubelet's node shutdown
// manager makes it. A part whose check changes calls
// Agent.RequestNodeStatusUpdate so that the node reports it at once.
func (b *Builder) WithNodeReadyCheck(check func() error) *Builder {
	if check == nil {
		b.misuse = append(b.misuse, configErr("builder", "WithNodeReadyCheck was given a nil check"))
		return b
	}
	b.readyChecks = append(b.readyChecks, check)
	return b
}

// nodeReady hands the Agent its ready checks and the channel of node
// status update requests.
func (bd *build) nodeReady() {
	bd.a.readyChecks = append([]func() error(nil), bd.b.readyChecks...)
	bd.a.nodeStatusKick = make(chan struct{}, 1)
}

// NodeReadyChecks returns the WithNodeReadyCheck checks, for the node
// status's Ready condition (nodestatus.SettersConfig.ReadyChecks).
func (a *Agent) NodeReadyChecks() []func() error {
	return append([]func() error(nil), a.readyChecks...)
}

// RequestNodeStatusUpdate asks the node status to be computed and reported
// now rather than at its next period (a ready check changed). It never
// blocks; requests made before the node status takes one are one.
func (a *Agent) RequestNodeStatusUpdate() {
	if a.nodeStatusKick == nil {
		return
	}
	select {
	case a.nodeStatusKick <- struct{}{}:
	default:
	}
}

// NodeStatusUpdateRequests delivers RequestNodeStatusUpdate's requests to
// the node status (nodestatus.Config.UpdateNow).
func (a *Agent) NodeStatusUpdateRequests() <-chan struct{} { return a.nodeStatusKick }
