package podconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Bounds DecodeStaticPods applies besides MaxManifestSize and
// MaxManifestDepth. Each is checked before the work it bounds: the shape of
// the document (nodes, aliases, pods, quantities) before anything is decoded
// into Go types, the per-pod counts before a pod is defaulted or validated.
// Exceeding a count wraps ErrTooLarge; a quantity out of range wraps
// ErrQuantityOutOfRange. Every error names the offending field or line.
const (
	// MaxManifestNodes bounds the number of values (scalars, maps, lists) in
	// a manifest, counting each use of a YAML alias as a copy of what it
	// names. A pod is typically 20 to 200 values. YAML is counted before
	// it is decoded, keys included and every indicator counted for the
	// most nodes it can introduce (countYAMLNodes), so YAML is held to a
	// stricter count than the same content in JSON.
	MaxManifestNodes = 1 << 20
	// MaxManifestAliases bounds the number of YAML alias references ("*a"),
	// and separately the number of anchors defined ("&a").
	MaxManifestAliases = 10_000
	// MaxPodsPerManifest bounds the items of a PodList.
	MaxPodsPerManifest = 10_000
	// MaxContainersPerPod bounds init, regular and ephemeral containers
	// together.
	MaxContainersPerPod = 1_000
	// MaxVolumesPerPod bounds spec.volumes.
	MaxVolumesPerPod = 1_000
	// MaxEnvPerContainer bounds env plus envFrom of one container.
	MaxEnvPerContainer = 10_000
	// MaxPortsPerContainer bounds the ports of one container.
	MaxPortsPerContainer = 1_000
	// MaxMountsPerContainer bounds volumeMounts plus volumeDevices of one
	// container.
	MaxMountsPerContainer = 1_000
	// MaxQuantityLength bounds the text of a resource quantity ("500m",
	// "128Mi", "1.5e9"), quotes and spaces included.
	MaxQuantityLength = 64
	// MaxQuantityExponent bounds the decimal exponent of a quantity written
	// in exponent form ("1e-99999999" is refused, not parsed: parsing it
	// would take minutes).
	MaxQuantityExponent = 100
)

// shapeError is a bound exceeded at a path of the JSON document.
func shapeError(sentinel error, path, format string, args ...any) error {
	if path == "" {
		path = "<document>"
	}
	return fmt.Errorf("%w: %s: %s", sentinel, path, fmt.Sprintf(format, args...))
}

// jsonFrame is one open object or array during scanJSON.
type jsonFrame struct {
	array  bool
	name   string // the key this container is the value of (an array element inherits its array's)
	key    string // objects: the key whose value comes next
	count  int    // values seen so far (array elements or object members)
	inMeta bool   // under a "metadata" key: holds no quantities
}

// scanJSON walks JSON text once, without building anything, and checks the
// shape bounds: nesting depth, number of values, number of top-level items
// (pods of a list), and every resource quantity's length and exponent
// (quantities are recognised by where they sit in a pod: see isQuantityAt).
// Invalid JSON is not reported here (the decoder does that) but never makes
// the scan slow or panic.
func scanJSON(data []byte) error {
	stack := make([]jsonFrame, 0, 16)
	nodes := 0
	path := func(leaf string) string { return jsonPath(stack, leaf) }
	// value is called for every value start; it returns the key the value
	// is under (if in an object).
	value := func() (string, error) {
		nodes++
		if nodes > MaxManifestNodes {
			return "", shapeError(ErrTooLarge, path(""), "more than %d values", MaxManifestNodes)
		}
		if len(stack) == 0 {
			return "", nil
		}
		top := &stack[len(stack)-1]
		if top.array {
			top.count++
			if len(stack) == 2 && top.name == "items" && top.count > MaxPodsPerManifest {
				return "", shapeError(ErrTooLarge, "items", "more than %d pods", MaxPodsPerManifest)
			}
			return "", nil
		}
		return top.key, nil
	}
	expectKey := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case ' ', '\t', '\r', '\n', ':':
			continue
		case ',':
			if n := len(stack); n > 0 && !stack[n-1].array {
				expectKey = true
			}
			continue
		case '{', '[':
			name, err := value()
			if err != nil {
				return err
			}
			if len(stack) >= MaxManifestDepth {
				return fmt.Errorf("%w: line %d: more than %d levels", ErrTooDeep, lineOf(data, i), MaxManifestDepth)
			}
			f := jsonFrame{array: c == '[', name: name}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				if parent.array {
					f.name = parent.name
				}
				f.inMeta = parent.inMeta || (!parent.array && name == "metadata")
			}
			stack = append(stack, f)
			expectKey = c == '{'
			continue
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
			continue
		}
		// A scalar: a string, or a literal/number running to a delimiter.
		start := i
		if c == '"' {
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
		} else {
			for i+1 < len(data) && !isJSONDelim(data[i+1]) {
				i++
			}
		}
		end := min(i+1, len(data))
		tok := data[start:end]
		if expectKey && len(stack) > 0 && !stack[len(stack)-1].array {
			top := &stack[len(stack)-1]
			top.key = jsonKey(tok)
			top.count++
			expectKey = false
			continue
		}
		key, err := value()
		if err != nil {
			return err
		}
		if isQuantityAt(stack, key) {
			if err := checkQuantityText(tok); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrQuantityOutOfRange, path(key), err)
			}
		}
	}
	return nil
}

func isJSONDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ':', ']', '}', '"', '{', '[':
		return true
	}
	return false
}

// jsonKey returns the text of a key token (quotes removed, escapes decoded).
func jsonKey(tok []byte) string {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return string(tok)
	}
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1])
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return string(tok)
	}
	return s
}

// jsonPath renders the open frames as a field path, e.g.
// "items[2].spec.containers[0].resources.limits.cpu".
func jsonPath(stack []jsonFrame, leaf string) string {
	var b strings.Builder
	for i, f := range stack {
		if f.array {
			fmt.Fprintf(&b, "[%d]", max(f.count-1, 0))
			continue
		}
		if i+1 < len(stack) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
	}
	if leaf != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(leaf)
	}
	return b.String()
}

// isQuantityAt reports whether a scalar under key in the innermost object of
// stack is a resource.Quantity of a v1.Pod: the values of resource lists
// (resources.limits/requests, spec.overhead, allocatedResources, the
// resources of a node-allocatable claim status), emptyDir.sizeLimit and
// resourceFieldRef.divisor. Nothing under metadata is a quantity.
func isQuantityAt(stack []jsonFrame, key string) bool {
	n := len(stack)
	if n == 0 || stack[n-1].array || stack[n-1].inMeta {
		return false
	}
	// Array elements carry their array's name, so the enclosing frame's
	// name is the parent field whether or not a list is in between.
	obj, parent := stack[n-1].name, ""
	if n >= 2 {
		parent = stack[n-2].name
	}
	switch {
	case (obj == "limits" || obj == "requests") && parent == "resources":
		return true
	case obj == "allocatedResources", obj == "overhead":
		return true
	case obj == "resources" && parent == "nodeAllocatableResourceClaimStatuses":
		return true
	case key == "sizeLimit" && obj == "emptyDir":
		return true
	case key == "divisor" && obj == "resourceFieldRef":
		return true
	}
	return false
}

// checkQuantityText bounds the raw JSON text of a quantity (a string with
// its quotes, or a number) the way resource.ParseQuantity will read it:
// length first, then the exponent of the exponent form.
func checkQuantityText(tok []byte) error {
	if len(tok) > MaxQuantityLength {
		return fmt.Errorf("quantity of %d bytes, the limit is %d", len(tok), MaxQuantityLength)
	}
	s := string(tok)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	s = strings.TrimSpace(s)
	if exp, ok := quantityExponent(s); ok && (exp > MaxQuantityExponent || exp < -MaxQuantityExponent) {
		return fmt.Errorf("quantity %q: exponent out of range (at most ±%d)", s, MaxQuantityExponent)
	}
	return nil
}

// quantityExponent finds the exponent of a quantity in exponent form: a
// number (sign, digits, '.', digits) followed by 'e' or 'E' and an integer.
// The integer saturates instead of overflowing.
func quantityExponent(s string) (int64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i+1 >= len(s) || (s[i] != 'e' && s[i] != 'E') {
		return 0, false
	}
	rest := s[i+1:]
	neg := false
	if rest[0] == '+' || rest[0] == '-' {
		neg = rest[0] == '-'
		rest = rest[1:]
	}
	if rest == "" {
		return 0, false
	}
	var v int64
	for j := 0; j < len(rest); j++ {
		d := rest[j]
		if d < '0' || d > '9' {
			return 0, false // not an exponent: ParseQuantity refuses it cheaply
		}
		if v < 1<<40 {
			v = v*10 + int64(d-'0')
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// checkPodBounds checks the per-pod counts of a decoded pod, before it is
// defaulted or validated.
func checkPodBounds(pod *v1.Pod) error {
	s := &pod.Spec
	if n := len(s.InitContainers) + len(s.Containers) + len(s.EphemeralContainers); n > MaxContainersPerPod {
		return shapeError(ErrTooLarge, "spec.containers", "%d containers (init, regular and ephemeral), the limit is %d", n, MaxContainersPerPod)
	}
	if n := len(s.Volumes); n > MaxVolumesPerPod {
		return shapeError(ErrTooLarge, "spec.volumes", "%d volumes, the limit is %d", n, MaxVolumesPerPod)
	}
	check := func(list string, i int, c *v1.Container) error {
		p := list + "[" + strconv.Itoa(i) + "]"
		if n := len(c.Env) + len(c.EnvFrom); n > MaxEnvPerContainer {
			return shapeError(ErrTooLarge, p+".env", "%d env entries (env and envFrom), the limit is %d", n, MaxEnvPerContainer)
		}
		if n := len(c.Ports); n > MaxPortsPerContainer {
			return shapeError(ErrTooLarge, p+".ports", "%d ports, the limit is %d", n, MaxPortsPerContainer)
		}
		if n := len(c.VolumeMounts) + len(c.VolumeDevices); n > MaxMountsPerContainer {
			return shapeError(ErrTooLarge, p+".volumeMounts", "%d volume mounts and devices, the limit is %d", n, MaxMountsPerContainer)
		}
		return nil
	}
	for i := range s.InitContainers {
		if err := check("spec.initContainers", i, &s.InitContainers[i]); err != nil {
			return err
		}
	}
	for i := range s.Containers {
		if err := check("spec.containers", i, &s.Containers[i]); err != nil {
			return err
		}
	}
	for i := range s.EphemeralContainers {
		c := v1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		if err := check("spec.ephemeralContainers", i, &c); err != nil {
			return err
		}
	}
	return nil
}
