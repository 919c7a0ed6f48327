package podconfig

import (
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidManifest: a static pod manifest (file, URL or push body)
	// could not be decoded, defaulted or validated. The wrapping error names
	// the origin and, where known, the line or the field.
	ErrInvalidManifest = errors.New("podconfig: invalid manifest")
	// ErrEmptyManifest: the manifest holds no document at all (empty or only
	// whitespace/comments). Also wraps ErrInvalidManifest: a file source keeps
	// the last good version, an HTTP source may treat it as "no pods".
	ErrEmptyManifest = errors.New("podconfig: empty manifest")
	// ErrTooLarge: the manifest exceeds MaxManifestSize, or expands (YAML
	// aliases) beyond the decoder's limits.
	ErrTooLarge = errors.New("podconfig: manifest too large")
	// ErrTooDeep: the manifest nests deeper than the decoder's limit.
	ErrTooDeep = errors.New("podconfig: manifest nested too deeply")
	// ErrQuantityOutOfRange: a resource quantity in a manifest is longer than
	// MaxQuantityLength or has an exponent beyond ±MaxQuantityExponent. It
	// is refused before it is parsed. Also wraps ErrInvalidManifest.
	ErrQuantityOutOfRange = errors.New("podconfig: quantity out of range")
	// ErrInvalidPod: a pod failed validation (ValidatePod).
	ErrInvalidPod = errors.New("podconfig: invalid pod")
	// ErrUIDConflict: a pod's UID is already stored for another source, or
	// for another namespace/name of the same source; the pod is refused
	// (logged and counted, see PodConfig.Refused) and the owner kept.
	ErrUIDConflict = errors.New("podconfig: pod UID already in use")
	// ErrInvalidSource: a source name is empty or not configured.
	ErrInvalidSource = errors.New("podconfig: invalid source")
	// ErrInvalidConfig: a Config or FileSourceConfig field is invalid; the
	// wrapping error names the field.
	ErrInvalidConfig = errors.New("podconfig: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)

// problems collects the configuration problems a constructor finds, each
// wrapping ErrInvalidConfig, so that it reports all of them at once.
type problems []error

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
}

// err is nil without problems, else all of them (errors.Join).
func (p problems) err() error { return errors.Join(p...) }
