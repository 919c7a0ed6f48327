package imagegc

import "context"

// Collect is one of Run's collections, for tests.
func (m *Manager) Collect(ctx context.Context) { m.collect(ctx) }
