package volumemgr

import "errors"

// Sentinel errors of the volume plugins, wrapped with %w and matched with
// errors.Is.
var (
	// ErrObjectNotFound: a configMap or secret does not exist (ObjectSource).
	ErrObjectNotFound = errors.New("volumemgr: object not found")
	// ErrKeyNotFound: a configMap or secret lacks a key an item names.
	ErrKeyNotFound = errors.New("volumemgr: key not found")
	// ErrNoObjectSource: a configMap or secret volume without an ObjectSource.
	ErrNoObjectSource = errors.New("volumemgr: no object source configured")
	// ErrNoTokenSource: a serviceAccountToken projection without a TokenSource.
	ErrNoTokenSource = errors.New("volumemgr: no token source configured")
	// ErrNoMounter: a tmpfs is needed but no Mounter is configured.
	ErrNoMounter = errors.New("volumemgr: no mounter configured")
	// ErrNoPlugin: no plugin supports a volume.
	ErrNoPlugin = errors.New("volumemgr: no volume plugin")
	// ErrMultiplePlugins: more than one plugin supports a volume.
	ErrMultiplePlugins = errors.New("volumemgr: more than one volume plugin")
	// ErrUnsafePath: a volume name, item path, key or subPath that could
	// escape its directory (.., absolute, NUL, empty segment, too long,
	// reserved "..data" prefix).
	ErrUnsafePath = errors.New("volumemgr: unsafe path")
	// ErrPathEscape: resolving a path would leave its volume directory
	// (a symlink pointing outside, a pre-seeded trap).
	ErrPathEscape = errors.New("volumemgr: path escapes the volume directory")
	// ErrHostPathType: a hostPath exists with the wrong type or is missing.
	ErrHostPathType = errors.New("volumemgr: hostPath type check failed")
	// ErrUnsupportedVolume: a volume or source field the plugin cannot serve
	// (emptyDir medium HugePages, unknown downwardAPI field).
	ErrUnsupportedVolume = errors.New("volumemgr: unsupported volume")
)
