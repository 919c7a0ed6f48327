// Package lifecycle is the contract every Run(ctx) error in nodekit keeps,
// and the two small helpers that implement it. It imports nothing of
// nodekit, so every package may use it.
//
// # The contract
//
// A value with a Run(ctx context.Context) error method (a PLEG, a pod
// source, a manager, the Agent) follows these rules:
//
//  1. Run at most once. Each value runs once in its life: a second call,
//     whether concurrent with the first or after it returned, returns an
//     error wrapping ErrAlreadyRan at once and touches nothing. To run again,
//     build a new value with New. Packages keep their own name for the
//     sentinel (pleg.ErrAlreadyRan, ...), and every one is the same value as
//     ErrAlreadyRan, so errors.Is(err, lifecycle.ErrAlreadyRan) matches any.
//  2. Run blocks. It returns only after every goroutine it started has
//     exited (children included), so a caller that waited for Run may
//     release what Run used.
//  3. A clean stop returns nil. When Run stops because ctx ended, it returns
//     nil, whatever ctx's error. A non-nil error always means a failure
//     (bad configuration found at start, an unrecoverable dependency, a
//     child that stopped early, ErrAlreadyRan). Transient errors inside the
//     loop are logged and retried, not returned.
//  4. Children fail fast. A parent whose child Run returns before the
//     parent's ctx ended (with an error, or with nil: a child has no reason
//     to stop on its own) stops its other children, waits for them, and
//     returns an error wrapping ErrStoppedEarly that names the child and
//     wraps the child's error (see StoppedEarly). The parent does not
//     restart the child: restarting is the embedding program's decision,
//     and it does so by building new values. The one exception is a child
//     that only speeds its parent up and is documented as optional there:
//     eviction.Manager goes on cycling every Interval when a threshold
//     notifier stops, as the kubelet does.
//
// # Use
//
// A type embeds a Once (the zero value is ready) and starts Run with it:
//
//	type Manager struct {
//		once lifecycle.Once
//		...
//	}
//
//	// Run ... It follows the lifecycle contract.
//	func (m *Manager) Run(ctx context.Context) error {
//		if err := m.once.Start(); err != nil {
//			return err
//		}
//		...
//	}
//
// A parent running children reports an early return with StoppedEarly:
//
//	if err := child.Run(ctx); ctx.Err() == nil {
//		fail(lifecycle.StoppedEarly("status manager", err))
//	}
package lifecycle
