package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// maxObjectFileSize caps one object file read by DirObjectSource.
const maxObjectFileSize = 4 << 20

// DirObjectSource is an ObjectSource over a local directory, for standalone
// and edge agents without an API server:
//
//	<Dir>/configmaps/<namespace>/<name>.yaml (or .yml, .json)
//	<Dir>/secrets/<namespace>/<name>.yaml    (data base64 as in a manifest; stringData merged in)
//
// Files are read on every call, so edits show up on the next resync. The
// namespace and name are checked as single path segments first; a file
// whose metadata names another object is an error; files are capped at 4 MiB.
type DirObjectSource struct {
	Dir string
}

var _ ObjectSource = (*DirObjectSource)(nil)

// ConfigMap reads <Dir>/configmaps/<namespace>/<name>.{yaml,yml,json}.
func (d *DirObjectSource) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	var cm v1.ConfigMap
	if err := d.read(ctx, "configmaps", namespace, name, &cm, &cm.ObjectMeta.Namespace, &cm.ObjectMeta.Name); err != nil {
		return nil, err
	}
	return &cm, nil
}

// Secret reads <Dir>/secrets/<namespace>/<name>.{yaml,yml,json}.
func (d *DirObjectSource) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	var s v1.Secret
	if err := d.read(ctx, "secrets", namespace, name, &s, &s.ObjectMeta.Namespace, &s.ObjectMeta.Name); err != nil {
		return nil, err
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	return &s, nil
}

func (d *DirObjectSource) read(ctx context.Context, kind, namespace, name string, into any, ns, nm *string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateSegment(namespace); err != nil {
		return fmt.Errorf("%s namespace: %w", kind, err)
	}
	if err := ValidateSegment(name); err != nil {
		return fmt.Errorf("%s name: %w", kind, err)
	}
	if d.Dir == "" {
		return fmt.Errorf("%s %s/%s: %w (no directory)", kind, namespace, name, ErrObjectNotFound)
	}
	base := filepath.Join(d.Dir, kind, namespace, name)
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		path := base + ext
		b, err := readCapped(path, maxObjectFileSize)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			return fmt.Errorf("%s %s/%s: parse %s: %w", kind, namespace, name, path, err)
		}
		if (*ns != "" && *ns != namespace) || (*nm != "" && *nm != name) {
			return fmt.Errorf("%s %s/%s: %s holds %s/%s", kind, namespace, name, path, *ns, *nm)
		}
		*ns, *nm = namespace, name
		return nil
	}
	return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, ErrObjectNotFound)
}

func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
