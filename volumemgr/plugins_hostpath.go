package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// hostPathPlugin exposes a path of the host, after the volume's type check.
// It creates nothing under the pod's volume dir and tears nothing down.
type hostPathPlugin struct{ cfg *pluginsConfig }

func (*hostPathPlugin) Name() string { return PluginNameHostPath }

func (*hostPathPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && vol.HostPath != nil }

func (*hostPathPlugin) RequiresRemount() bool { return false }

// checkHostPath: absolute, no ".." segment, no NUL.
func checkHostPath(p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("%w: hostPath %q must be absolute", ErrUnsafePath, truncForError(p))
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: hostPath contains NUL", ErrUnsafePath)
	}
	if len(p) > MaxPathLength {
		return fmt.Errorf("%w: hostPath longer than %d bytes", ErrUnsafePath, MaxPathLength)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: hostPath %q must not contain '..'", ErrUnsafePath, truncForError(p))
		}
	}
	return nil
}

func (p *hostPathPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, _ string) error {
	if pod == nil || vol == nil || vol.HostPath == nil {
		return fmt.Errorf("%w: not a hostPath volume", ErrUnsupportedVolume)
	}
	if err := ValidateSegment(vol.Name); err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := vol.HostPath.Path
	if err := checkHostPath(path); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	typ := v1.HostPathUnset
	if vol.HostPath.Type != nil {
		typ = *vol.HostPath.Type
	}
	if err := checkHostPathType(path, typ); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

// checkHostPathType applies the kubelet's hostPath type semantics (the
// path's target is examined: symlinks are followed, as the kubelet does).
func checkHostPathType(path string, typ v1.HostPathType) error {
	typeErr := func(what string) error {
		return fmt.Errorf("%w: hostPath type %q: %s is not %s", ErrHostPathType, typ, path, what)
	}
	fi, err := os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("%w: hostPath type %q: %w", ErrHostPathType, typ, err)
	}
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if missing {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("%w: hostPath type %q: create %s: %w", ErrHostPathType, typ, path, err)
			}
			return nil
		}
		if !fi.IsDir() {
			return typeErr("a directory")
		}
	case v1.HostPathDirectory:
		if missing {
			return typeErr("a directory (it does not exist)")
		}
		if !fi.IsDir() {
			return typeErr("a directory")
		}
	case v1.HostPathFileOrCreate:
		if missing {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("%w: hostPath type %q: create parent of %s: %w", ErrHostPathType, typ, path, err)
			}
			f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("%w: hostPath type %q: create %s: %w", ErrHostPathType, typ, path, err)
			}
			return f.Close()
		}
		if !fi.Mode().IsRegular() {
			return typeErr("a file")
		}
	case v1.HostPathFile:
		if missing {
			return typeErr("a file (it does not exist)")
		}
		if !fi.Mode().IsRegular() {
			return typeErr("a file")
		}
	case v1.HostPathSocket:
		if missing || fi.Mode().Type() != fs.ModeSocket {
			return typeErr("a socket file")
		}
	case v1.HostPathCharDev:
		if missing || fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
			return typeErr("a character device")
		}
	case v1.HostPathBlockDev:
		if missing || fi.Mode().Type() != fs.ModeDevice {
			return typeErr("a block device")
		}
	default:
		return fmt.Errorf("%w: hostPath type %q of %s is unknown", ErrHostPathType, typ, path)
	}
	return nil
}

func (*hostPathPlugin) TearDown(context.Context, string) error { return nil }

func (*hostPathPlugin) HostPath(_ *v1.Pod, vol *v1.Volume, _ string) (string, error) {
	if vol == nil || vol.HostPath == nil {
		return "", fmt.Errorf("%w: not a hostPath volume", ErrUnsupportedVolume)
	}
	if err := checkHostPath(vol.HostPath.Path); err != nil {
		return "", err
	}
	return vol.HostPath.Path, nil
}
