package volumemgr

// PrepareSubPath resolves subPath beneath volumeDir without following any
// symlink out of it and bind-mounts the resolved file or directory onto
// target (created if missing, as a file or a dir matching the source), so
// that a symlink swapped in after the check cannot redirect the mount.
// hostPath is target; cleanup unmounts it and removes target. Use
// SubPathTarget for the kubelet's stable target path.
func PrepareSubPath(volumeDir, subPath, target string) (hostPath string, cleanup func() error, err error) {
	return "", nil, ErrUnsupportedVolume
}
