package kuberuntime

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// Termination messages, as the kubelet bounds them.
const (
	// maxTerminationMessageBytes is what is read of a termination-message
	// file (the kubelet's limit per container).
	maxTerminationMessageBytes = 4096
	// maxTerminationLogLines and maxTerminationLogBytes bound the log tail
	// used by TerminationMessageFallbackToLogsOnError.
	maxTerminationLogLines = 80
	maxTerminationLogBytes = 2048
	// terminationFileMode lets a container running as any user write the
	// file (it is bind-mounted read-write).
	terminationFileMode = 0o666
	podContainersDir    = "containers"
)

// terminationMessageMount makes the host file a container writes its
// termination message to, <PodsDir>/<uid>/containers/<name>.<random>, one
// per container instance, and returns its mount. Nil without PodsDir or a
// termination message path, or when a volume is already mounted there.
// (The kubelet makes a directory per container name to hold the files; a
// container name has no '.', so the files of all containers share one
// directory here, and starting a container costs no inode for a
// directory.)
func (b *configBuilder) terminationMessageMount(pod *v1.Pod, c *v1.Container, mounts []*runtimeapi.Mount) (*runtimeapi.Mount, error) {
	if b.cfg.PodsDir == "" || c.TerminationMessagePath == "" {
		return nil, nil
	}
	for _, m := range mounts {
		if m.GetContainerPath() == c.TerminationMessagePath {
			return nil, nil
		}
	}
	if !filepath.IsAbs(c.TerminationMessagePath) {
		return nil, fmt.Errorf("terminationMessagePath %q is not absolute", c.TerminationMessagePath)
	}
	dir := filepath.Join(b.cfg.PodsDir, string(pod.UID), podContainersDir)
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("termination message file name: %w", err)
	}
	path := filepath.Join(dir, c.Name+"."+hex.EncodeToString(id[:]))
	err := fsutil.CreateExclusive(path, terminationFileMode)
	if errors.Is(err, fs.ErrNotExist) {
		// The pod's directory is usually there already (the sync loop
		// makes it); make it otherwise.
		if err := fsutil.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("termination message directory: %w", err)
		}
		err = fsutil.CreateExclusive(path, terminationFileMode)
	}
	if err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: c.TerminationMessagePath}, nil
}

// terminationMessage is the message of an exited container whose runtime
// gave none: what it wrote to its termination-message file (at most 4 KiB),
// or, with FallbackToLogsOnError and a failure exit, the tail of its log.
func (m *Manager) terminationMessage(s *runtimeapi.ContainerStatus, info containerInfo, labels map[string]string) string {
	if info.TerminationMsgAt != "" && m.cfg.PodsDir != "" {
		for _, mnt := range s.GetMounts() {
			if mnt.GetContainerPath() != info.TerminationMsgAt {
				continue
			}
			// Only files this manager made are read.
			host := filepath.Clean(mnt.GetHostPath())
			if !strings.HasPrefix(host, filepath.Clean(m.cfg.PodsDir)+string(filepath.Separator)) {
				break
			}
			if msg, err := readBounded(host, maxTerminationMessageBytes); err == nil && len(msg) > 0 {
				return string(msg)
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				m.log.Debug("reading a termination message failed", zap.String("path", host), zap.Error(err))
			}
			break
		}
	}
	if info.TerminationMsgPolicy != string(v1.TerminationMessageFallbackToLogsOnError) || s.GetExitCode() == 0 {
		return ""
	}
	path := s.GetLogPath()
	if path != "" && !filepath.IsAbs(path) {
		dir, ok := podLogDirName(labels[LabelPodNamespace], labels[LabelPodName], types.UID(labels[LabelPodUID]))
		if !ok {
			return ""
		}
		path = filepath.Join(m.cfg.PodLogsRoot, dir, path)
	}
	if path == "" {
		return ""
	}
	return logTail(path, maxTerminationLogLines, maxTerminationLogBytes)
}

// readBounded reads at most limit bytes of a regular file.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// logTail returns the content of the last lines of a CRI log file (each
// line "<time> <stream> <P|F> <content>"), at most maxLines lines and
// maxBytes bytes (the newest kept), joined back into the container's
// output.
func logTail(path string, maxLines, maxBytes int) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Read only the end of a large log.
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return ""
		}
	}
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 16<<10), window)
	var partial []byte
	for sc.Scan() {
		fields := bytes.SplitN(sc.Bytes(), []byte{' '}, 4)
		if len(fields) < 3 {
			continue
		}
		var content []byte
		if len(fields) == 4 {
			content = fields[3]
		}
		partial = append(partial, content...)
		if string(fields[2]) == "P" {
			continue
		}
		lines = append(lines, append(partial, '\n'))
		partial = nil
		if len(lines) > maxLines {
			lines = lines[1:]
		}
	}
	out := bytes.Join(lines, nil)
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return string(out)
}
