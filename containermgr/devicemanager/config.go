package devicemanager

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

const (
	// PluginDirName is the plugin directory's name under an agent's root
	// directory (the kubelet's /var/lib/kubelet/device-plugins):
	// PluginDir: filepath.Join(root, devicemanager.PluginDirName).
	PluginDirName = "device-plugins"
	// RegistryDirName is the plugin watcher directory's name under the root
	// directory (the kubelet's /var/lib/kubelet/plugins_registry).
	RegistryDirName = "plugins_registry"
	// SocketName is the registration socket in Config.PluginDir.
	SocketName = "kubelet.sock"
	// StateFileName is the checkpoint in Config.StateDir (the kubelet's
	// name; the format is internal/checkpoint's).
	StateFileName = "kubelet_internal_checkpoint"
	// DefaultGracePeriod is how long a disconnected plugin's devices stay
	// in capacity (the kubelet's endpointStopGracePeriod).
	DefaultGracePeriod = 5 * time.Minute
	// DefaultCallTimeout bounds each call to a plugin.
	DefaultCallTimeout = 30 * time.Second
	// MaxDevicesPerResource bounds the device list a plugin may send.
	MaxDevicesPerResource = 4096
	// maxSocketPath is the longest unix socket path (sun_path is 108 bytes
	// with its terminating NUL).
	maxSocketPath = 107
)

// Config configures a Manager. Only PluginDir is required.
type Config struct {
	// PluginDir is where the registration socket kubelet.sock is served
	// and where plugins put their own sockets (the kubelet's
	// /var/lib/kubelet/device-plugins; for an agent, <root>/PluginDirName).
	PluginDir string
	// RegistryDir, when set, is watched for plugins that register through
	// the plugin watcher (pluginregistration v1, the kubelet's
	// /var/lib/kubelet/plugins_registry); "" = not watched.
	RegistryDir string
	// StateDir holds the checkpoint; "" = PluginDir.
	StateDir string
	// GracePeriod is how long a disconnected plugin's devices stay in
	// capacity (as unhealthy); then the resource reports 0. Default 5m.
	GracePeriod time.Duration
	// CallTimeout bounds each call to a plugin. Default 30s.
	CallTimeout time.Duration
	// ReconcilePeriod is how often Run frees the devices of gone pods
	// (Reconcile). Default 1m.
	ReconcilePeriod time.Duration
	Clock           clock.WithTicker
	Logger          *zap.Logger
	// Registerer receives the manager\'s metrics; nil = none.
	Registerer prometheus.Registerer
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.PluginDir == "" {
		return bad("PluginDir is required")
	}
	for name, d := range map[string]string{"PluginDir": c.PluginDir, "StateDir": c.StateDir, "RegistryDir": c.RegistryDir} {
		if d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
			return bad("%s (%q) must be an absolute, clean path", name, d)
		}
	}
	if l := len(filepath.Join(c.PluginDir, SocketName)); l > maxSocketPath {
		return bad("PluginDir (%q) is too long for a unix socket path (%d bytes, limit %d)", c.PluginDir, l, maxSocketPath)
	}
	if c.GracePeriod < 0 || c.CallTimeout < 0 || c.ReconcilePeriod < 0 {
		return bad("GracePeriod, CallTimeout and ReconcilePeriod must not be negative")
	}
	if c.ReconcilePeriod == 0 {
		c.ReconcilePeriod = time.Minute
	}
	if c.StateDir == "" {
		c.StateDir = c.PluginDir
	}
	if c.GracePeriod == 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.Named("devicemanager")
	return nil
}
