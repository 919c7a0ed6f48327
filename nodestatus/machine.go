package nodestatus

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes the host as the node status reports it.
type Machine struct {
	// NumCores is the number of logical CPUs.
	NumCores int
	// MemoryCapacity is the total memory in bytes (MemTotal).
	MemoryCapacity int64
	// HugePages maps a huge page size in bytes to the number of pages of
	// that size the kernel has set aside.
	HugePages map[int64]int64
	// EphemeralStorage is the size in bytes of the file system holding the
	// agent's root directory; 0 means unknown and is not reported.
	EphemeralStorage int64

	MachineID     string
	SystemUUID    string
	BootID        string
	KernelVersion string
	// OSImage is the PRETTY_NAME of /etc/os-release.
	OSImage string
}

// MachineFunc returns the current description of the machine.
type MachineFunc func(ctx context.Context) (*Machine, error)

// maxProcFile bounds the size of any /proc, /sys or /etc file read here.
const maxProcFile = 1 << 20

// maxCPUs bounds the CPU count parsed from sysfs.
const maxCPUs = 1 << 16

// MachineReader reads a Machine from the host's /proc, /sys and /etc and a
// statfs of the storage directory. Every source can be redirected, so tests
// run it on a temp directory.
type MachineReader struct {
	// Root is prefixed to every absolute path read ("" or "/" = the host).
	Root string
	// StorageDir is the directory whose file system size is the
	// ephemeral-storage capacity (the agent's root directory); "" = Root.
	StorageDir string
	// NumCPU is used when sysfs does not list the online CPUs; nil =
	// runtime.NumCPU.
	NumCPU func() int
	// Statfs is nil = unix.Statfs.
	Statfs func(path string, st *unix.Statfs_t) error
}

// Read implements MachineFunc. Memory and CPU count are required: without
// them it returns ErrMachineInfo. Missing IDs, huge pages or a failing
// statfs leave those fields empty.
func (r MachineReader) Read(ctx context.Context) (*Machine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &Machine{}
	mem, err := r.memTotal()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMachineInfo, err)
	}
	m.MemoryCapacity = mem
	m.NumCores = r.numCores()
	if m.NumCores <= 0 {
		return nil, fmt.Errorf("%w: no CPUs found", ErrMachineInfo)
	}
	m.HugePages = r.hugePages()
	m.EphemeralStorage = r.storage()
	m.MachineID = r.firstLine("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.SystemUUID = r.firstLine("/sys/class/dmi/id/product_uuid")
	m.BootID = r.firstLine("/proc/sys/kernel/random/boot_id")
	m.KernelVersion = r.firstLine("/proc/sys/kernel/osrelease")
	m.OSImage = r.osImage()
	return m, nil
}

func (r MachineReader) path(p string) string {
	if r.Root == "" || r.Root == "/" {
		return p
	}
	return filepath.Join(r.Root, p)
}

func (r MachineReader) read(p string) ([]byte, error) {
	f, err := os.Open(r.path(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxProcFile)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (r MachineReader) firstLine(paths ...string) string {
	for _, p := range paths {
		b, err := r.read(p)
		if err != nil {
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

func (r MachineReader) memTotal() (int64, error) {
	b, err := r.read("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "MemTotal:" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 || n > (1<<53)/1024 {
			return 0, fmt.Errorf("bad MemTotal %q", f[1])
		}
		if len(f) >= 3 && f[2] != "kB" {
			return 0, fmt.Errorf("unknown MemTotal unit %q", f[2])
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

func (r MachineReader) numCores() int {
	if b, err := r.read("/sys/devices/system/cpu/online"); err == nil {
		if n, ok := countCPUList(strings.TrimSpace(string(b))); ok && n > 0 {
			return n
		}
	}
	if r.NumCPU != nil {
		return r.NumCPU()
	}
	return runtime.NumCPU()
}

// countCPUList counts the CPUs of a sysfs list such as "0-3,8,10-11".
func countCPUList(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	total := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= maxCPUs {
			return 0, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= maxCPUs {
				return 0, false
			}
		}
		total += b - a + 1
		if total > maxCPUs {
			return 0, false
		}
	}
	return total, true
}

func (r MachineReader) hugePages() map[int64]int64 {
	dir := r.path("/sys/kernel/mm/hugepages")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out map[int64]int64
	for _, e := range entries {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok := strings.CutSuffix(size, "kB")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(kb, 10, 64)
		if err != nil || n <= 0 || n > 1<<40 {
			continue
		}
		count := r.firstLine(filepath.Join("/sys/kernel/mm/hugepages", e.Name(), "nr_hugepages"))
		c, err := strconv.ParseInt(count, 10, 64)
		if err != nil || c < 0 {
			continue
		}
		if out == nil {
			out = map[int64]int64{}
		}
		out[n*1024] = c
	}
	return out
}

func (r MachineReader) storage() int64 {
	dir := r.StorageDir
	if dir == "" {
		dir = r.path("/")
	}
	statfs := r.Statfs
	if statfs == nil {
		statfs = unix.Statfs
	}
	var st unix.Statfs_t
	if err := statfs(dir, &st); err != nil {
		return 0
	}
	if st.Bsize <= 0 {
		return 0
	}
	blocks := st.Blocks
	if blocks > uint64(1<<62)/uint64(st.Bsize) {
		return 0
	}
	return int64(blocks) * int64(st.Bsize)
}

func (r MachineReader) osImage() string {
	b, err := r.read("/etc/os-release")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			return uq
		}
		return strings.Trim(v, `"'`)
	}
	return ""
}
