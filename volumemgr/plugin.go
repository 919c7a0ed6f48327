package volumemgr

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Plugin names, as the kubelet spells them. The on-disk directory of a volume
// is pods/<uid>/volumes/<EscapePluginName(name)>/<volume name>.
const (
	PluginNameEmptyDir    = "kubernetes.io/empty-dir"
	PluginNameHostPath    = "kubernetes.io/host-path"
	PluginNameConfigMap   = "kubernetes.io/configmap"
	PluginNameSecret      = "kubernetes.io/secret"
	PluginNameProjected   = "kubernetes.io/projected"
	PluginNameDownwardAPI = "kubernetes.io/downward-api"
)

// Plugin sets up and tears down one kind of volume for a pod.
//
// Implementations are safe for concurrent use on different dirs. Calls for
// the same dir must be serialised by the caller (the reconciler does).
type Plugin interface {
	// Name is the kubelet's plugin name, e.g. "kubernetes.io/empty-dir".
	Name() string
	// CanSupport reports whether the plugin handles vol (by its source field).
	CanSupport(vol *v1.Volume) bool
	// RequiresRemount reports whether the content follows API objects or pod
	// metadata and must be re-projected on resync (configMap, secret,
	// projected, downwardAPI).
	RequiresRemount() bool
	// SetUp makes the volume's content available at dir (the kubelet's
	// pods/<uid>/volumes/<escaped plugin name>/<volume name>). It is
	// idempotent and is called again on remount; an unchanged payload causes
	// no file system writes.
	SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error
	// TearDown undoes SetUp: it unmounts a tmpfs it mounted and removes dir
	// and the content it made. For hostPath it does nothing to the host path
	// (it only removes the empty bookkeeping dir if present).
	TearDown(ctx context.Context, dir string) error
	// HostPath returns the path to bind into containers: dir for most
	// plugins, the host path for hostPath.
	HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error)
}

// ObjectSource is where configMaps and secrets come from (the API server, a
// local directory, a test map). A missing object is reported with an error
// for which errors.Is(err, ErrObjectNotFound) is true.
type ObjectSource interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// TokenSource issues service account tokens for projected
// serviceAccountToken sources.
type TokenSource interface {
	ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (token string, err error)
}

// Mounter mounts and unmounts file systems. SystemMounter is the real one
// (Linux, root); tests use a fake.
type Mounter interface {
	// MountTmpfs mounts a fresh tmpfs on target (an existing dir). A
	// sizeBytes of 0 or less means no size option (the kernel's default).
	MountTmpfs(target string, sizeBytes int64) error
	// Unmount unmounts target (not lazily).
	Unmount(target string) error
	// IsMountPoint reports whether path is the root of a mount. A missing
	// path is an error for which errors.Is(err, fs.ErrNotExist) is true.
	IsMountPoint(path string) (bool, error)
}

// TmpfsPolicy chooses whether secret, projected and downwardAPI volumes are
// written onto a tmpfs (memory) or into a plain directory on disk.
type TmpfsPolicy int

const (
	// TmpfsAuto (the default) uses tmpfs, as the kubelet does, when the
	// Mounter is a *SystemMounter and the process runs as root; otherwise a
	// plain directory.
	TmpfsAuto TmpfsPolicy = iota
	// TmpfsAlways uses tmpfs through the configured Mounter (SetUp fails
	// with ErrNoMounter when there is none).
	TmpfsAlways
	// TmpfsNever always writes into a plain directory.
	TmpfsNever
)

// PluginsConfig configures DefaultPlugins. Every field is optional.
type PluginsConfig struct {
	// Objects provides configMaps and secrets. Nil: configMap and secret
	// sources fail with ErrNoObjectSource unless optional.
	Objects ObjectSource
	// Tokens issues projected service account tokens. Nil: a
	// serviceAccountToken projection fails with ErrNoTokenSource.
	Tokens TokenSource
	// Mounter mounts tmpfs for emptyDir medium Memory and for secrets. Nil:
	// emptyDir medium Memory fails with ErrNoMounter and secrets go to disk.
	Mounter Mounter
	// SecretTmpfs is the tmpfs policy for secret, projected and downwardAPI
	// volumes (default TmpfsAuto).
	SecretTmpfs TmpfsPolicy
	// NodeAllocatable returns the node's allocatable resources. It caps the
	// size of memory-backed emptyDirs and is the value downwardAPI reports
	// for a container without a limit. Nil: no cap, and such limits fail.
	NodeAllocatable func() v1.ResourceList
	// Clock stamps the atomic writer's timestamped dirs (default real).
	Clock clock.Clock
	// Logger (default zap.NewNop()), named "volumemgr".
	Logger *zap.Logger
}

// EscapePluginName turns a plugin name into a single path segment, as the
// kubelet does: "kubernetes.io/empty-dir" -> "kubernetes.io~empty-dir".
func EscapePluginName(name string) string {
	return strings.ReplaceAll(name, "/", "~")
}

// UnescapePluginName reverses EscapePluginName.
func UnescapePluginName(escaped string) string {
	return strings.ReplaceAll(escaped, "~", "/")
}

// FindPlugin returns the plugin among plugins that supports vol. It fails
// with ErrNoPlugin when none does and ErrMultiplePlugins when more than one
// does.
func FindPlugin(plugins []Plugin, vol *v1.Volume) (Plugin, error) {
	if vol == nil {
		return nil, fmt.Errorf("%w: nil volume", ErrNoPlugin)
	}
	var found Plugin
	for _, p := range plugins {
		if p == nil || !p.CanSupport(vol) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: volume %q: %s and %s", ErrMultiplePlugins, vol.Name, found.Name(), p.Name())
		}
		found = p
	}
	if found == nil {
		return nil, fmt.Errorf("%w: volume %q", ErrNoPlugin, vol.Name)
	}
	return found, nil
}

// PluginByName returns the plugin with the given (unescaped) name, or nil.
func PluginByName(plugins []Plugin, name string) Plugin {
	for _, p := range plugins {
		if p != nil && p.Name() == name {
			return p
		}
	}
	return nil
}

// DefaultPlugins returns the six built-in plugins (emptyDir, hostPath,
// configMap, secret, projected, downwardAPI) sharing cfg. It does no I/O.
func DefaultPlugins(cfg PluginsConfig) []Plugin {
	c := cfg.withDefaults()
	return []Plugin{
		&emptyDirPlugin{cfg: c},
		&hostPathPlugin{cfg: c},
		&configMapPlugin{cfg: c},
		&secretPlugin{cfg: c},
		&projectedPlugin{cfg: c},
		&downwardAPIPlugin{cfg: c},
	}
}

// pluginsConfig is PluginsConfig with defaults filled in.
type pluginsConfig struct {
	PluginsConfig
	secretTmpfs bool // resolved TmpfsPolicy: use tmpfs for secret-like volumes
}

func (cfg PluginsConfig) withDefaults() *pluginsConfig {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Logger = cfg.Logger.Named("volumemgr")
	c := &pluginsConfig{PluginsConfig: cfg}
	switch cfg.SecretTmpfs {
	case TmpfsAlways:
		c.secretTmpfs = true
	case TmpfsNever:
		c.secretTmpfs = false
	default:
		_, real := cfg.Mounter.(*SystemMounter)
		c.secretTmpfs = real && isRoot()
	}
	return c
}
