package kubeletconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kc "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/podconfig"
)

// The bounds of a configuration file, checked before it is decoded: the
// same as a pod manifest's (podconfig.MaxManifestSize, 10 MiB, and
// podconfig.MaxManifestDepth, 100 levels). A KubeletConfiguration is a few
// kilobytes nested five levels deep.
const (
	MaxFileSize = podconfig.MaxManifestSize
	MaxDepth    = podconfig.MaxManifestDepth
)

// The apiVersion and kind a configuration file must have.
const (
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	Kind       = "KubeletConfiguration"
)

// File is a configuration file as LoadFile read it.
type File struct {
	// Path is the file's absolute path.
	Path string
	// Config is the file's configuration with the kubelet's defaults
	// (SetDefaults) and its relative paths resolved against the file's
	// directory, as the kubelet does. Not validated yet: flags may
	// override it first (see Validate and Apply).
	Config *kc.KubeletConfiguration
	// Given has the top-level fields the file sets (their JSON names,
	// "maxPods"), before defaulting.
	Given map[string]bool
}

// LoadFile reads, decodes (Decode), resolves the relative paths of and
// defaults (SetDefaults) the configuration file at path.
func LoadFile(path string) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %s: %w", abs, err)
	}
	c, given, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	resolvePaths(c, filepath.Dir(abs))
	SetDefaults(c)
	return &File{Path: abs, Config: c, Given: given}, nil
}

// Decode decodes a KubeletConfiguration (YAML or JSON) strictly with
// apimachinery's serializers: an unknown field, a duplicate key or a value
// of the wrong type is an error naming it (ErrDecode), and so is an
// apiVersion or kind other than kubelet.config.k8s.io/v1beta1
// KubeletConfiguration (ErrWrongKind). data over MaxFileSize or nested
// deeper than MaxDepth is refused before it is decoded (ErrTooLarge). The
// result is not defaulted.
func Decode(data []byte) (*kc.KubeletConfiguration, error) {
	c, _, err := decode(data)
	return c, err
}

func decode(data []byte) (*kc.KubeletConfiguration, map[string]bool, error) {
	if len(data) > MaxFileSize {
		return nil, nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, fmt.Errorf("%w: the file is empty", ErrDecode)
	}
	// The depth is checked on the YAML's JSON form (aliases expanded by
	// the YAML parser, which bounds their expansion).
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if err := checkDepth(js); err != nil {
		return nil, nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, nil, fmt.Errorf("%w: the document is not an object: %v", ErrDecode, err)
	}
	var apiVersion, kind string
	_ = json.Unmarshal(top["apiVersion"], &apiVersion)
	_ = json.Unmarshal(top["kind"], &kind)
	if apiVersion != APIVersion || kind != Kind {
		return nil, nil, fmt.Errorf("%w: apiVersion %q, kind %q", ErrWrongKind, apiVersion, kind)
	}
	scheme := runtime.NewScheme()
	if err := kc.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("kubeletconfig: scheme: %w", err)
	}
	// apimachinery's JSON or YAML serializer in strict mode, chosen as its
	// recognizer would, without the codec factory's other serializers
	// (protobuf, CBOR, versioning), which a binary that only reads this
	// file need not link.
	isJSON := bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: !isJSON, Strict: true})
	obj, _, err := strict.Decode(data, nil, &kc.KubeletConfiguration{})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrDecode, strictMessage(err))
	}
	c, ok := obj.(*kc.KubeletConfiguration)
	if !ok {
		return nil, nil, fmt.Errorf("%w: decoded a %T", ErrWrongKind, obj)
	}
	given := make(map[string]bool, len(top))
	for k := range top {
		if k != "apiVersion" && k != "kind" {
			given[k] = true
		}
	}
	return c, given, nil
}

// strictMessage words apimachinery's strict decoding errors: every unknown
// field and duplicate key, one per line.
func strictMessage(err error) string {
	if strict, ok := runtime.AsStrictDecodingError(err); ok {
		var msgs []string
		for _, e := range strict.Errors() {
			msgs = append(msgs, e.Error())
		}
		return strings.Join(msgs, "; ")
	}
	return err.Error()
}

// checkDepth refuses JSON nested deeper than MaxDepth.
func checkDepth(js []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range js {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > MaxDepth {
				return fmt.Errorf("%w: nested more than %d levels", ErrTooLarge, MaxDepth)
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return nil
}

// resolvePaths makes the file's relative paths relative to dir, as the
// kubelet does with the paths of its configuration file.
func resolvePaths(c *kc.KubeletConfiguration, dir string) {
	for _, p := range []*string{&c.StaticPodPath, &c.Authentication.X509.ClientCAFile, &c.TLSCertFile, &c.TLSPrivateKeyFile, c.ResolverConfig} {
		if p != nil && *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
