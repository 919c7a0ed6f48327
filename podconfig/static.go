package podconfig

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/nodekit/nodekit/internal/yamljson"
	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Limits applied by DecodeStaticPods to every manifest, whatever its origin.
const (
	// MaxManifestSize is the largest manifest accepted, checked before any
	// decoding (the kubelet's limit too).
	MaxManifestSize = 10 << 20
	// MaxManifestDepth bounds the nesting of maps and lists in a manifest,
	// counting through YAML aliases. A real pod nests about a dozen levels.
	MaxManifestDepth = 100
	// maxExpandedSize bounds the size of the document after YAML aliases are
	// expanded (an estimate in bytes of the equivalent JSON).
	maxExpandedSize = 2 * MaxManifestSize
	// yamlSlack is the part of the YAML bounds that does not grow with
	// the input (see yamlExpandedLimit and yamlSlowNodeLimit).
	yamlSlack = 4 << 20
	// yamlSlowNodeCost is what go-yaml and YAMLToJSON spend per counted
	// value (measured: 180 bytes for a list of short scalars, 900 for a
	// list of tagged ones), rounded up.
	yamlSlowNodeCost = 1024
)

// yamlExpandedLimit is the most JSON a YAML manifest of n bytes may become,
// aliases expanded: a few times the input, like JSON's own cost. Without
// aliases the JSON is at most about three times the YAML (quoting and
// escapes), so only alias expansion can reach it.
func yamlExpandedLimit(n int) int { return min(maxExpandedSize, 4*n+yamlSlack) }

// yamlSlowNodeLimit is how many values (as countYAMLNodes counts them) a
// manifest of n bytes may have to be decoded by go-yaml, the fallback for
// what yamljson does not convert (tags, merge keys, non-string or
// duplicate keys): go-yaml's tree then costs at most a few times n too.
func yamlSlowNodeLimit(n int) int { return (4*n + yamlSlack) / yamlSlowNodeCost }

// yamlToJSONSlow converts what yamljson leaves (why) with go-yaml, after
// bounding its tree to yamlSlowNodeLimit values and, when aliases may
// expand it, measuring the expansion with yamljson.Measure (the same
// limits as Convert's, merge keys counted as the aliases they are).
func yamlToJSONSlow(data []byte, lim yamljson.Limits, why error) ([]byte, error) {
	if n, limit := countYAMLNodes(data), yamlSlowNodeLimit(len(data)); n > limit {
		return nil, fmt.Errorf("%w: about %d YAML values, the limit is %d for %d bytes of YAML that needs a full YAML decoder (%w)",
			ErrTooLarge, n, limit, len(data), why)
	}
	if bytes.IndexByte(data, '*') >= 0 {
		if err := yamljson.Measure(data, lim); err != nil {
			return nil, err
		}
	}
	return yaml.YAMLToJSON(data)
}

// StaticPodOptions says where a static pod manifest came from and how its
// pods are defaulted.
type StaticPodOptions struct {
	// NodeName is the node the pods run on: it becomes spec.nodeName and the
	// suffix of every pod name ("<name>-<lowercase node name>").
	NodeName string
	// Source is the source name the pods belong to (SourceFile, SourceHTTP,
	// SourcePush, ...). For SourceFile the generated UID also hashes the node
	// name and the path ("host:<node>file:<path>"); for any other source it
	// hashes "url:<origin>".
	Source string
	// Origin is the file path or URL the manifest was read from. It is part
	// of the generated UID and is named in every error.
	Origin string
	// AddNoExecuteToleration adds the toleration {operator: Exists, effect:
	// NoExecute} so the pods are not evicted by NoExecute taints (the kubelet
	// does this for file pods only).
	AddNoExecuteToleration bool
}

// DecodeStaticPods decodes one static pod manifest: a Pod, or a PodList (a
// "List" whose items are all Pods is accepted too), in YAML or JSON. Only the
// first YAML document is read.
//
// Every pod is defaulted the way the kubelet defaults static pods (see
// doc.go: UID from a hash of the manifest and its origin when empty, name
// suffixed with the node name, namespace "default", spec.nodeName, the
// config.hash annotation, phase Pending, and the API defaults a node needs)
// and then validated with ValidatePod(pod, true).
//
// Errors wrap ErrInvalidManifest and name the origin; a YAML or JSON syntax
// error names the line, a validation error the field. Oversized input wraps
// ErrTooLarge as well (bytes, values, aliases, pods, and per pod containers,
// volumes, env, ports, mounts: see the Max* constants), over-deep input
// ErrTooDeep, a quantity too long or with too large an exponent
// ErrQuantityOutOfRange, input with no document ErrEmptyManifest. All these
// bounds are checked before the work they bound, so a hostile manifest costs
// time linear in its size. YAML is converted to JSON in one stream of
// parser events, building no tree (internal/yamljson), so it costs a few
// times its size in memory (at most 5 times plus 1 MiB in the tests), as
// JSON does; YAML that needs a full decoder (tags, merge keys, duplicate
// keys) is decoded by go-yaml only when its values are few enough for the
// same bound (yamlSlowNodeLimit), and refused otherwise. The result is
// all-or-nothing: one bad pod in a list fails the whole manifest.
func DecodeStaticPods(data []byte, opts StaticPodOptions) ([]*v1.Pod, error) {
	origin := opts.Origin
	if origin == "" {
		origin = "<unknown>"
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %w", ErrInvalidManifest, origin, fmt.Errorf(format, args...))
	}
	if len(data) > MaxManifestSize {
		return nil, fail("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxManifestSize)
	}
	js, err := manifestToJSON(data)
	if err != nil {
		return nil, fail("%w", err)
	}

	var tm metav1.TypeMeta
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fail("not an object: %w", jsonError(err, js, data))
	}
	var raws []json.RawMessage
	var prefixes []string
	switch tm.Kind {
	case "Pod":
		raws = []json.RawMessage{js}
		prefixes = []string{""}
	case "PodList", "List":
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(js, &list); err != nil {
			return nil, fail("%w", jsonError(err, js, data))
		}
		if len(list.Items) > MaxPodsPerManifest {
			return nil, fail("%w: items: %d pods, the limit is %d", ErrTooLarge, len(list.Items), MaxPodsPerManifest)
		}
		for i, raw := range list.Items {
			var itm metav1.TypeMeta
			if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &itm); err != nil {
				return nil, fail("items[%d]: %w", i, jsonError(err, raw, nil))
			}
			if itm.Kind != "Pod" && (itm.Kind != "" || tm.Kind != "PodList") {
				return nil, fail("items[%d]: kind %q is not Pod", i, itm.Kind)
			}
			raws = append(raws, raw)
			prefixes = append(prefixes, fmt.Sprintf("items[%d]: ", i))
		}
	case "":
		return nil, fail("kind is missing (want Pod or PodList)")
	default:
		return nil, fail("kind %q is not Pod or PodList", tm.Kind)
	}
	if tm.APIVersion != "v1" {
		return nil, fail("apiVersion %q is not v1", tm.APIVersion)
	}

	pods := make([]*v1.Pod, 0, len(raws))
	for i, raw := range raws {
		pod := &v1.Pod{}
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
			return nil, fail("%s%w", prefixes[i], jsonError(err, raw, nil))
		}
		if pod.Name == "" {
			return nil, fail("%smetadata.name: Required value: a static pod needs a name", prefixes[i])
		}
		if err := checkPodBounds(pod); err != nil {
			return nil, fail("%spod %q: %w", prefixes[i], pod.Name, err)
		}
		if err := defaultStaticPod(pod, opts); err != nil {
			return nil, fail("%spod %q: %w", prefixes[i], pod.Name, err)
		}
		if err := ValidatePod(pod, true); err != nil {
			return nil, fail("%spod %q: %w", prefixes[i], pod.Name, err)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// manifestToJSON turns a YAML or JSON manifest into JSON, bounding nesting
// depth and alias expansion before the conversion can allocate.
func manifestToJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, ErrEmptyManifest
	}
	if trimmed[0] == '{' {
		if err := scanJSON(trimmed); err != nil {
			return nil, err
		}
		if !json.Valid(trimmed) {
			var v any
			err := json.Unmarshal(trimmed, &v)
			return nil, jsonError(err, trimmed, trimmed)
		}
		return trimmed, nil
	}
	// Count the nodes before anything is decoded: a cheap over-count that
	// refuses the densest inputs in one pass that allocates nothing.
	if n := countYAMLNodes(data); n > MaxManifestNodes {
		return nil, fmt.Errorf("%w: about %d YAML values (keys and values counted before decoding), the limit is %d", ErrTooLarge, n, MaxManifestNodes)
	}
	// Convert in one stream of parser events, building no tree: the cost
	// is a few times the input (see yamlExpandedLimit), as for JSON.
	lim := yamljson.Limits{
		MaxDepth:   MaxManifestDepth,
		MaxNodes:   MaxManifestNodes,
		MaxAliases: MaxManifestAliases,
		MaxOutput:  yamlExpandedLimit(len(data)),
		TooLarge:   ErrTooLarge,
		TooDeep:    ErrTooDeep,
	}
	js, err := yamljson.Convert(data, lim)
	if errors.Is(err, yamljson.ErrUnsupported) {
		js, err = yamlToJSONSlow(data, lim, err)
	}
	if err != nil {
		return nil, err // go-yaml's message names the line
	}
	if len(js) > maxExpandedSize {
		return nil, fmt.Errorf("%w: %d bytes once converted to JSON", ErrTooLarge, len(js))
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, ErrEmptyManifest
	}
	if err := scanJSON(js); err != nil {
		return nil, err
	}
	return js, nil
}

// countYAMLNodes returns an upper bound on the number of nodes (keys,
// values and collections) of YAML text, in one pass that allocates nothing.
// Apart from the root, every node of a YAML document is introduced by an
// indicator: a block sequence entry ("- "), a mapping key and value (": ",
// or ":" after a quoted key or inside a flow collection), an explicit key
// ("? "), or a flow collection ('[', '{') and its separators (','). Each
// indicator is counted for the most nodes it can introduce, wherever it
// appears (inside quotes, comments or block scalars too): counting too
// many only makes the bound stricter, never too loose. Aliases are not
// counted here; checkYAMLShape measures their expansion.
func countYAMLNodes(data []byte) int {
	n := 1 // the root
	for i, c := range data {
		switch c {
		case ':':
			n += 2 // a key and its value
		case ',':
			n += 2 // the next entry of a flow collection (a key and a null value in a flow mapping)
		case '[', '{':
			n += 3 // the collection and its first entry (a key and a null value in a flow mapping)
		case '-', '?':
			if i+1 == len(data) || isYAMLSpace(data[i+1]) {
				n += 2 // a sequence entry, or an explicit key and its value
			}
		}
	}
	return n
}

func isYAMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonError rewrites a JSON decoding error so it names the line (computed in
// text when text is the JSON given to the decoder) or the field.
func jsonError(err error, js, text []byte) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && text != nil {
		return fmt.Errorf("line %d: %w", lineOf(text, int(se.Offset)), err)
	}
	if ok, off := k8sjson.SyntaxErrorOffset(err); ok && text != nil {
		return fmt.Errorf("line %d: %w", lineOf(js, int(off)), err)
	}
	return err
}

func lineOf(data []byte, offset int) int {
	if offset > len(data) {
		offset = len(data)
	}
	if offset < 0 {
		offset = 0
	}
	return 1 + bytes.Count(data[:offset], []byte{'\n'})
}

// StaticPodName is the name a static pod gets on a node: "<name>-<node>",
// with the node name lowercased.
func StaticPodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// staticPodUID hashes the pod as decoded (before any defaulting) together
// with where it came from. The same manifest at the same origin on the same
// node gives the same UID across restarts.
func staticPodUID(pod *v1.Pod, opts StaticPodOptions) (types.UID, error) {
	enc, err := json.Marshal(pod) // maps are encoded in key order: deterministic
	if err != nil {
		return "", err
	}
	h := fnv.New128a()
	_, _ = h.Write(enc)
	if opts.Source == kubetypes.SourceFile {
		_, _ = fmt.Fprintf(h, "host:%s", opts.NodeName)
		_, _ = fmt.Fprintf(h, "file:%s", opts.Origin)
	} else {
		_, _ = fmt.Fprintf(h, "url:%s", opts.Origin)
	}
	return types.UID(hex.EncodeToString(h.Sum(nil))), nil
}

func defaultStaticPod(pod *v1.Pod, opts StaticPodOptions) error {
	if pod.UID == "" {
		uid, err := staticPodUID(pod, opts)
		if err != nil {
			return err
		}
		pod.UID = uid
	}
	pod.Name = StaticPodName(pod.Name, opts.NodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = opts.NodeName
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string, 1)
	}
	pod.Annotations[kubetypes.ConfigHashAnnotation] = string(pod.UID)
	if opts.AddNoExecuteToleration {
		addToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	SetPodDefaults(pod)
	pod.Status.Phase = v1.PodPending
	return nil
}

func addToleration(pod *v1.Pod, t v1.Toleration) {
	for i := range pod.Spec.Tolerations {
		e := &pod.Spec.Tolerations[i]
		if e.Key == t.Key && e.Effect == t.Effect && e.Value == t.Value &&
			(e.Operator == t.Operator || (e.Operator == "" && t.Operator == v1.TolerationOpEqual)) {
			*e = t
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}
