package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// maxFile bounds what is read of one cgroup or proc file (memory.stat is
// a few KiB; a bigger file is read in part).
const maxFile = 256 << 10

// readFile reads a cgroup or proc file with plain system calls (see
// fsutil.ReadAtMost: cheaper than os.ReadFile, which matters for the
// hundreds of small files one summary reads).
func readFile(name string) ([]byte, error) { return fsutil.ReadAtMost(name, maxFile) }

// Hierarchy says where the controllers are mounted.
type Hierarchy struct {
	// V2 is the unified hierarchy: Memory, CPU and Pids are all Root.
	V2   bool
	Root string
	// Memory, CPU (cpuacct on v1) and Pids are the hierarchy roots of
	// those controllers. CPU is empty on a v1 host without cpuacct.
	Memory, CPU, Pids string
}

// Detect finds the hierarchies under root (such as /sys/fs/cgroup): a
// cgroup.controllers file there means v2; otherwise the v1 memory
// controller must be root/memory, and cpuacct is root/cpuacct or
// root/cpu,cpuacct.
func Detect(root string) (Hierarchy, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return Hierarchy{V2: true, Root: root, Memory: root, CPU: root, Pids: root}, nil
	}
	mem := filepath.Join(root, "memory")
	if _, err := os.Stat(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
		return Hierarchy{}, fmt.Errorf("%w: no cgroup v2 (%s) nor v1 memory controller (%s) under %s: %w",
			ErrNoHierarchy, "cgroup.controllers", "memory/memory.usage_in_bytes", root, err)
	}
	h := Hierarchy{Root: root, Memory: mem, Pids: filepath.Join(root, "pids")}
	for _, name := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		d := filepath.Join(root, name)
		if _, err := os.Stat(filepath.Join(d, "cpuacct.usage")); err == nil {
			h.CPU = d
			break
		}
	}
	return h, nil
}

// MemoryDir is the memory cgroup rel (a path below the hierarchy root).
func (h Hierarchy) MemoryDir(rel string) string {
	return filepath.Join(h.Memory, filepath.FromSlash(rel))
}

// CPUDir is the cpu accounting cgroup rel; "" when there is none.
func (h Hierarchy) CPUDir(rel string) string {
	if h.CPU == "" {
		return ""
	}
	return filepath.Join(h.CPU, filepath.FromSlash(rel))
}

// PidsDir is the pids cgroup rel.
func (h Hierarchy) PidsDir(rel string) string { return filepath.Join(h.Pids, filepath.FromSlash(rel)) }

// IsGone reports whether err is what reading a removed cgroup (or file)
// returns.
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoDevice)
}

// Sat is a-b, or 0 when b > a.
func Sat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// ReadUint reads a file holding one unsigned number.
func ReadUint(file string) (uint64, error) {
	b, err := readFile(file)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a number: %q", file, v)
	}
	return n, nil
}

// ReadKeyValues parses a flat-keyed file ("key value" per line) and
// returns the values of keys (0 for a key not there) and which were found.
// Lines that are not "key value" are ignored; a key asked for whose value
// is not a number is an error.
func ReadKeyValues(file string, keys ...string) ([]uint64, []bool, error) {
	b, err := readFile(file)
	if err != nil {
		return nil, nil, err
	}
	vals, found := make([]uint64, len(keys)), make([]bool, len(keys))
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		if !ok {
			continue
		}
		for i, want := range keys {
			if string(k) != want {
				continue
			}
			v = bytes.TrimSpace(v)
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s is not a number: %q", file, k, v)
			}
			vals[i], found[i] = n, true
		}
	}
	return vals, found, nil
}

// WorkingSet is usage minus inactive file pages of the memory cgroup dir.
func WorkingSet(dir string, v2 bool) (uint64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	usage, err := ReadUint(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	v, _, err := ReadKeyValues(filepath.Join(dir, "memory.stat"), inactiveKey)
	if err != nil {
		return 0, err
	}
	return Sat(usage, v[0]), nil
}

// MemoryLimit is the memory cgroup's limit; math.MaxUint64 for "max".
func MemoryLimit(dir string, v2 bool) (uint64, error) {
	name := "memory.limit_in_bytes"
	if v2 {
		name = "memory.max"
	}
	file := filepath.Join(dir, name)
	b, err := readFile(file)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return math.MaxUint64, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a number: %q", file, v)
	}
	return n, nil
}

// Memory is one reading of a memory cgroup.
type Memory struct {
	Usage, WorkingSet, RSS, PageFaults, MajorPageFaults uint64
}

// ReadMemory reads the memory cgroup dir. On v1 usage is
// memory.usage_in_bytes and RSS total_rss (+ total_rss_huge is included
// by the kernel); on v2 usage is memory.current and RSS anon. isRoot: dir
// is a v2 hierarchy root, which has no memory.current; usage is then anon
// + file of memory.stat (what runc's cgroup library, and so cAdvisor,
// reports for it).
func ReadMemory(dir string, v2, isRoot bool) (Memory, error) {
	var m Memory
	if !v2 {
		usage, err := ReadUint(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return m, err
		}
		v, _, err := ReadKeyValues(filepath.Join(dir, "memory.stat"), "total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault")
		if err != nil {
			return m, err
		}
		return Memory{Usage: usage, WorkingSet: Sat(usage, v[0]), RSS: v[1], PageFaults: v[2], MajorPageFaults: v[3]}, nil
	}
	file := filepath.Join(dir, "memory.stat")
	v, found, err := ReadKeyValues(file, "inactive_file", "anon", "pgfault", "pgmajfault", "file")
	if err != nil {
		return m, err
	}
	var usage uint64
	if isRoot {
		if !found[1] || !found[4] {
			return m, fmt.Errorf("%s has no anon or file", file)
		}
		usage = v[1] + v[4]
	} else if usage, err = ReadUint(filepath.Join(dir, "memory.current")); err != nil {
		return m, err
	}
	return Memory{Usage: usage, WorkingSet: Sat(usage, v[0]), RSS: v[1], PageFaults: v[2], MajorPageFaults: v[3]}, nil
}

// ReadCPUUsage is the CPU time the cgroup used, in nanoseconds: v1
// cpuacct.usage, v2 usage_usec of cpu.stat.
func ReadCPUUsage(dir string, v2 bool) (uint64, error) {
	if !v2 {
		return ReadUint(filepath.Join(dir, "cpuacct.usage"))
	}
	file := filepath.Join(dir, "cpu.stat")
	v, found, err := ReadKeyValues(file, "usage_usec")
	if err != nil {
		return 0, err
	}
	if !found[0] {
		return 0, fmt.Errorf("%s has no usage_usec", file)
	}
	if v[0] > math.MaxUint64/1000 {
		return 0, fmt.Errorf("%s: usage_usec %d out of range", file, v[0])
	}
	return v[0] * 1000, nil
}

// MemTotal is MemTotal of procRoot/meminfo, in bytes.
func MemTotal(procRoot string) (uint64, error) {
	file := filepath.Join(procRoot, "meminfo")
	b, err := readFile(file)
	if err != nil {
		return 0, fmt.Errorf("reading MemTotal: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > math.MaxUint64/1024 {
			return 0, fmt.Errorf("%s: bad MemTotal %q", file, strings.TrimSpace(rest))
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("%s: no MemTotal", file)
}

// PIDs is the node's process table: MaxPID is the smaller of
// kernel.pid_max and kernel.threads-max, NumProcesses the number of
// scheduling entities (threads) in /proc/loadavg, the count pid_max limits.
func PIDs(procRoot string) (maxPID, numProcesses uint64, err error) {
	pidMax, err := ReadUint(filepath.Join(procRoot, "sys", "kernel", "pid_max"))
	if err != nil {
		return 0, 0, fmt.Errorf("reading pid_max: %w", err)
	}
	if threads, err := ReadUint(filepath.Join(procRoot, "sys", "kernel", "threads-max")); err == nil {
		pidMax = min(pidMax, threads)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Errorf("reading threads-max: %w", err)
	}
	file := filepath.Join(procRoot, "loadavg")
	b, err := readFile(file)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the number of processes: %w", err)
	}
	// "0.10 0.20 0.30 2/345 6789": running/total scheduling entities.
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0, 0, fmt.Errorf("%s: want 5 fields, got %q", file, strings.TrimSpace(string(b)))
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseUint(total, 10, 64)
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%s: bad process count %q", file, f[3])
	}
	return pidMax, n, nil
}

// BootTime is the btime line of procRoot/stat.
func BootTime(procRoot string) (time.Time, error) {
	file := filepath.Join(procRoot, "stat")
	v, found, err := ReadKeyValues(file, "btime")
	if err != nil {
		return time.Time{}, err
	}
	if !found[0] || v[0] > math.MaxInt64 {
		return time.Time{}, fmt.Errorf("%s: no btime", file)
	}
	return time.Unix(int64(v[0]), 0), nil
}

// SelfCgroups returns the cgroup of the process pid ("self" for this one)
// per v1 controller ("memory", "cpuacct", ...) and, under the key "", its
// v2 cgroup, from procRoot/<pid>/cgroup; paths are relative to their
// hierarchy root, without a leading slash ("" for the root).
func SelfCgroups(procRoot, pid string) (map[string]string, error) {
	b, err := readFile(filepath.Join(procRoot, pid, "cgroup"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		// "4:memory:/process_api/x", "0::/user.slice"
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		p := strings.Trim(parts[2], "/")
		if parts[1] == "" {
			out[""] = p
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			out[c] = p
		}
	}
	return out, nil
}

// PodUID returns the UID a pod cgroup directory is named for: "pod<uid>"
// (cgroupfs) or "<prefix>-pod<uid with _ for ->.slice" (systemd).
func PodUID(name string) (string, bool) {
	if rest, ok := strings.CutPrefix(name, "pod"); ok && rest != "" && !strings.HasSuffix(name, ".slice") {
		return rest, true
	}
	if base, ok := strings.CutSuffix(name, ".slice"); ok {
		if i := strings.LastIndex(base, "-pod"); i >= 0 && i+4 < len(base) {
			return strings.ReplaceAll(base[i+4:], "_", "-"), true
		}
	}
	return "", false
}

// PodCgroup is one pod's cgroup.
type PodCgroup struct {
	UID string
	// Rel is the cgroup relative to a hierarchy root.
	Rel string
}

// ListPodCgroups lists the pod cgroups directly under the pods cgroup
// podsRel (relative to the hierarchy root dir) and under its non-pod
// children (the QoS cgroups). A QoS cgroup that vanishes while it is read
// is skipped.
func ListPodCgroups(root, podsRel string) ([]PodCgroup, error) {
	podsRel = filepath.FromSlash(podsRel)
	top := filepath.Join(root, podsRel)
	entries, err := os.ReadDir(top)
	if err != nil {
		return nil, fmt.Errorf("pods cgroup: %w", err)
	}
	var out []PodCgroup
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if uid, ok := PodUID(e.Name()); ok {
			out = append(out, PodCgroup{uid, filepath.Join(podsRel, e.Name())})
			continue
		}
		sub, err := os.ReadDir(filepath.Join(top, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("pods cgroup: %w", err)
		}
		for _, se := range sub {
			if uid, ok := PodUID(se.Name()); ok && se.IsDir() {
				out = append(out, PodCgroup{uid, filepath.Join(podsRel, e.Name(), se.Name())})
			}
		}
	}
	return out, nil
}

// FsStats is a file system's size and free space, in bytes and inodes.
type FsStats struct {
	// Available is what an unprivileged user may still use; Free includes
	// the blocks reserved for root. Used is Capacity - Free.
	Available, Capacity, Free uint64
	Inodes, InodesFree        uint64
}
