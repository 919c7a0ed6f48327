package devicemanager

import "context"

// registryWatcher follows RegistryDir (pluginregistration v1).
type registryWatcher struct{ m *Manager }

func newRegistryWatcher(m *Manager) (*registryWatcher, error) { return &registryWatcher{m: m}, nil }

func (w *registryWatcher) run(ctx context.Context) { <-ctx.Done() }
