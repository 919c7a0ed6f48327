package containermgr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Version is the cgroup version a CgroupManager writes.
type Version string

// Cgroup versions.
const (
	// V1: one hierarchy per controller under <root>/<controller>.
	V1 Version = "v1"
	// V2: the unified hierarchy at <root>.
	V2 Version = "v2"
)

// Mode is the layout found at a cgroup root.
type Mode string

// Layouts DetectMode reports.
const (
	// ModeV1: only v1 controller hierarchies. Supported (as V1).
	ModeV1 Mode = "v1"
	// ModeHybrid: v1 controller hierarchies plus a v2 mount at
	// <root>/unified holding no controllers this package uses. Supported,
	// treated as V1 (the v2 part is ignored).
	ModeHybrid Mode = "hybrid"
	// ModeUnified: cgroup v2 only. Supported (as V2).
	ModeUnified Mode = "unified"
)

// Version is the cgroup version this package uses for the mode.
func (m Mode) Version() Version {
	if m == ModeUnified {
		return V2
	}
	return V1
}

// DetectMode looks at the file system mounted at root: cgroup2 is unified;
// a tmpfs holding v1 controller hierarchies is v1, or hybrid when
// <root>/unified is a cgroup2 mount. Anything else (an ordinary directory)
// is ErrUnsupportedCgroupMode: give CgroupManagerConfig.Version explicitly to
// use such a directory as an emulated hierarchy (tests).
func DetectMode(root string) (Mode, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return "", fmt.Errorf("%w: statfs %s: %w", ErrUnsupportedCgroupMode, root, err)
	}
	switch st.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		return ModeUnified, nil
	case unix.TMPFS_MAGIC:
		var cst unix.Statfs_t
		if err := unix.Statfs(filepath.Join(root, "cpu"), &cst); err != nil || cst.Type != unix.CGROUP_SUPER_MAGIC {
			return "", fmt.Errorf("%w: %s is a tmpfs without a v1 cpu hierarchy; supported: cgroup v2 (unified), cgroup v1 and hybrid (used as v1)", ErrUnsupportedCgroupMode, root)
		}
		var ust unix.Statfs_t
		if err := unix.Statfs(filepath.Join(root, "unified"), &ust); err == nil && ust.Type == unix.CGROUP2_SUPER_MAGIC {
			return ModeHybrid, nil
		}
		return ModeV1, nil
	}
	return "", fmt.Errorf("%w: %s is not a cgroup file system (type %#x); supported: cgroup v2 (unified), cgroup v1 and hybrid (used as v1)", ErrUnsupportedCgroupMode, root, st.Type)
}

// v1Controllers are the v1 hierarchies a cgroup is made in (those present
// under the root). cpu and memory are required.
func v1Controllers() []string {
	// unified is the v2 mount of a hybrid host: runtimes place containers
	// there too, so pod cgroups are made and removed there as well.
	return []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb", "blkio", "devices", "freezer", "systemd", "unified"}
}

// v2Controllers are enabled in cgroup.subtree_control of every parent.
func v2Controllers() []string { return []string{"cpu", "cpuset", "memory", "pids", "hugetlb"} }

// CgroupManagerConfig configures a CgroupManager.
type CgroupManagerConfig struct {
	// Root is where the hierarchy is mounted: /sys/fs/cgroup on a host, a
	// temp dir in tests. Required.
	Root string
	// Version: V1 or V2. Required (see DetectMode).
	Version Version
	// Driver spells names (default DriverCgroupfs). With DriverSystemd the
	// directories are named as systemd slices; the manager writes them itself
	// (it does not talk to systemd over D-Bus).
	Driver Driver
	// Emulated marks Root as an ordinary directory standing in for a cgroup
	// file system (tests): control files are created when written and
	// directories removed with their files.
	Emulated bool
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// CgroupManager creates, updates and removes cgroups by writing control
// files: per controller directory on v1 (cpu.shares, cpu.cfs_quota_us,
// cpu.cfs_period_us, memory.limit_in_bytes, pids.max, hugetlb) and in one
// directory on v2 (cpu.weight, cpu.max, memory.max, pids.max, hugetlb). It
// is safe for concurrent use on different cgroups.
type CgroupManager struct {
	root     string
	version  Version
	driver   Driver
	emulated bool
	log      *zap.Logger
}

// NewCgroupManager validates cfg. It does no I/O.
func NewCgroupManager(cfg CgroupManagerConfig) (*CgroupManager, error) {
	var errs []error
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		errs = append(errs, fmt.Errorf("%w: Root %q must be an absolute path", ErrInvalidConfig, cfg.Root))
	}
	if cfg.Version != V1 && cfg.Version != V2 {
		errs = append(errs, fmt.Errorf("%w: Version %q (want v1 or v2)", ErrInvalidConfig, cfg.Version))
	}
	if cfg.Driver == "" {
		cfg.Driver = DriverCgroupfs
	}
	if cfg.Driver != DriverCgroupfs && cfg.Driver != DriverSystemd {
		errs = append(errs, fmt.Errorf("%w: Driver %q (want cgroupfs or systemd)", ErrInvalidConfig, cfg.Driver))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &CgroupManager{root: filepath.Clean(cfg.Root), version: cfg.Version, driver: cfg.Driver, emulated: cfg.Emulated, log: cfg.Logger}, nil
}

// Version is the cgroup version written.
func (m *CgroupManager) Version() Version { return m.version }

// Driver is the naming driver.
func (m *CgroupManager) Driver() Driver { return m.driver }

// Name spells name in the driver's syntax (what a runtime gets as cgroup
// parent).
func (m *CgroupManager) Name(name CgroupName) string { return name.Spell(m.driver) }

// Path is the directory of name in one v1 controller (ignored on v2).
func (m *CgroupManager) Path(controller string, name CgroupName) string {
	rel := m.Name(name)
	if m.version == V2 {
		return filepath.Join(m.root, rel)
	}
	return filepath.Join(m.root, controller, rel)
}

// dirs are the directories of name, by controller ("" on v2); v1
// controllers not mounted under the root are left out.
func (m *CgroupManager) dirs(name CgroupName) (map[string]string, error) {
	if err := name.Validate(); err != nil {
		return nil, err
	}
	rel := m.Name(name)
	if m.version == V2 {
		return map[string]string{"": filepath.Join(m.root, rel)}, nil
	}
	ctrls := v1Controllers()
	out := make(map[string]string, len(ctrls))
	for _, c := range ctrls {
		if _, err := os.Stat(filepath.Join(m.root, c)); err != nil {
			if c == "cpu" || c == "memory" {
				return nil, fmt.Errorf("%w: the v1 %s hierarchy is not mounted at %s", ErrUnsupportedCgroupMode, c, filepath.Join(m.root, c))
			}
			continue
		}
		out[c] = filepath.Join(m.root, c, rel)
	}
	return out, nil
}

// Exists reports whether the cgroup exists (on v1: in the cpu, memory and,
// when mounted, pids hierarchies).
func (m *CgroupManager) Exists(name CgroupName) bool {
	dirs, err := m.dirs(name)
	if err != nil {
		return false
	}
	for c, d := range dirs {
		if c != "" && c != "cpu" && c != "memory" && c != "pids" {
			continue
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// Create makes the cgroup (and missing parents) and writes rc.
func (m *CgroupManager) Create(name CgroupName, rc *ResourceConfig) error {
	dirs, err := m.dirs(name)
	if err != nil {
		return err
	}
	for c, d := range dirs {
		if err := m.mkdirs(c, d); err != nil {
			return err
		}
	}
	return m.write(name, dirs, rc)
}

// mkdirs creates d and its missing parents below the controller's root; a
// new v1 cpuset cgroup gets its parent's cpus and mems (else no task could
// join it), a new v2 cgroup's parent gets the controllers enabled.
func (m *CgroupManager) mkdirs(controller, d string) error {
	base := m.root
	if controller != "" {
		base = filepath.Join(m.root, controller)
	}
	rel, err := filepath.Rel(base, d)
	if err != nil || rel == "." {
		return err
	}
	cur := base
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		if fi, err := os.Stat(cur); err == nil && fi.IsDir() {
			continue
		}
		if m.version == V2 {
			m.enableControllers(parent)
		}
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", cur, err)
		}
		if controller == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if err := m.inherit(parent, cur, f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// enableControllers turns on the v2 controllers for parent's children, one
// at a time (a controller the kernel lacks does not stop the others).
func (m *CgroupManager) enableControllers(parent string) {
	have := ""
	if b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); err == nil {
		have = " " + strings.Join(strings.Fields(string(b)), " ") + " "
	}
	for _, c := range v2Controllers() {
		if strings.Contains(have, " "+c+" ") {
			continue
		}
		if m.emulated {
			have += c + " "
			continue
		}
		if err := m.writeFile(parent, "cgroup.subtree_control", "+"+c); err != nil {
			m.log.Debug("enabling a controller", zap.String("cgroup", parent), zap.String("controller", c), zap.Error(err))
		}
	}
	if m.emulated {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.TrimSpace(have)+"\n"), 0o644)
	}
}

// inherit copies file from parent to child when the child's is empty.
func (m *CgroupManager) inherit(parent, child, file string) error {
	cur, err := os.ReadFile(filepath.Join(child, file))
	if err == nil && strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	if err != nil && !m.emulated {
		return fmt.Errorf("reading %s: %w", filepath.Join(child, file), err)
	}
	val, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		if m.emulated {
			return nil
		}
		return fmt.Errorf("reading %s: %w", filepath.Join(parent, file), err)
	}
	return m.writeFile(child, file, strings.TrimSpace(string(val)))
}

// Update writes rc into an existing cgroup.
func (m *CgroupManager) Update(name CgroupName, rc *ResourceConfig) error {
	dirs, err := m.dirs(name)
	if err != nil {
		return err
	}
	if !m.Exists(name) {
		return fmt.Errorf("%w: %s", ErrCgroupNotFound, m.Name(name))
	}
	return m.write(name, dirs, rc)
}

// write sets the control files for rc.
func (m *CgroupManager) write(name CgroupName, dirs map[string]string, rc *ResourceConfig) error {
	if rc == nil {
		return nil
	}
	var errs []error
	set := func(controller, file, val string) {
		d, ok := dirs[controller]
		if m.version == V2 {
			d, ok = dirs[""]
		}
		if !ok {
			return
		}
		if err := m.writeFile(d, file, val); err != nil {
			errs = append(errs, err)
		}
	}
	if m.version == V1 {
		if rc.CPUShares != nil {
			set("cpu", "cpu.shares", strconv.FormatUint(*rc.CPUShares, 10))
		}
		if rc.CPUPeriod != nil {
			set("cpu", "cpu.cfs_period_us", strconv.FormatUint(*rc.CPUPeriod, 10))
		}
		if rc.CPUQuota != nil {
			q := *rc.CPUQuota
			if q < 0 {
				q = -1
			}
			set("cpu", "cpu.cfs_quota_us", strconv.FormatInt(q, 10))
		}
		if rc.Memory != nil {
			set("memory", "memory.limit_in_bytes", limitString(*rc.Memory, "-1"))
		}
		if rc.PidsLimit != nil {
			set("pids", "pids.max", limitString(*rc.PidsLimit, "max"))
		}
		if rc.CPUSet != "" {
			set("cpuset", "cpuset.cpus", rc.CPUSet)
		}
		for _, size := range sortedSizes(rc.HugePageLimit) {
			set("hugetlb", "hugetlb."+pageSizeName(size)+".limit_in_bytes", limitString(rc.HugePageLimit[size], "-1"))
		}
	} else {
		if rc.CPUShares != nil {
			set("", "cpu.weight", strconv.FormatUint(CPUWeight(*rc.CPUShares), 10))
		}
		if rc.CPUQuota != nil || rc.CPUPeriod != nil {
			quota, period := "max", strconv.FormatUint(DefaultCPUPeriod, 10)
			if rc.CPUQuota != nil && *rc.CPUQuota > 0 {
				quota = strconv.FormatInt(*rc.CPUQuota, 10)
			}
			if rc.CPUPeriod != nil && *rc.CPUPeriod > 0 {
				period = strconv.FormatUint(*rc.CPUPeriod, 10)
			}
			set("", "cpu.max", quota+" "+period)
		}
		if rc.Memory != nil {
			set("", "memory.max", limitString(*rc.Memory, "max"))
		}
		if rc.PidsLimit != nil {
			set("", "pids.max", limitString(*rc.PidsLimit, "max"))
		}
		if rc.CPUSet != "" {
			set("", "cpuset.cpus", rc.CPUSet)
		}
		for _, size := range sortedSizes(rc.HugePageLimit) {
			set("", "hugetlb."+pageSizeName(size)+".max", limitString(rc.HugePageLimit[size], "max"))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("updating cgroup %s: %w", m.Name(name), errors.Join(errs...))
	}
	return nil
}

func limitString(v int64, unlimited string) string {
	if v < 0 {
		return unlimited
	}
	return strconv.FormatInt(v, 10)
}

func sortedSizes(m map[int64]int64) []int64 {
	if len(m) == 0 {
		return nil
	}
	out := make([]int64, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// pageSizeName spells a hugepage size as the kernel names hugetlb files:
// 2MB, 1GB, 64KB.
func pageSizeName(size int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for size >= 1024 && size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	return strconv.FormatInt(size, 10) + units[i]
}

// writeFile writes one control file. On a real hierarchy it goes through
// opencontainers/cgroups (openat2 confined to the cgroup mount); an
// emulated root creates the file.
func (m *CgroupManager) writeFile(dir, file, val string) error {
	if m.emulated {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, file), err)
		}
		return nil
	}
	if err := cgroups.WriteFile(dir, file, val); err != nil {
		return fmt.Errorf("writing %q to %s: %w", val, filepath.Join(dir, file), err)
	}
	return nil
}

// Pids lists the processes in the cgroup and its descendants (on v1 from
// the cpu, memory and pids hierarchies). A missing cgroup has none.
func (m *CgroupManager) Pids(name CgroupName) ([]int, error) {
	dirs, err := m.dirs(name)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []int
	for c, d := range dirs {
		if c != "" && c != "cpu" && c != "memory" && c != "pids" {
			continue
		}
		pids, err := readAllPids(d)
		if err != nil {
			return nil, err
		}
		for _, p := range pids {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// readAllPids reads cgroup.procs in d and every directory below it; a
// missing directory or file counts as empty.
func readAllPids(d string) ([]int, error) {
	var out []int
	err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		if !e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out, err
}

// Destroy removes the cgroup and every cgroup below it, in every
// controller. A missing cgroup is not an error; a cgroup that still has
// processes fails with ErrCgroupBusy (kill them first).
func (m *CgroupManager) Destroy(name CgroupName) error {
	dirs, err := m.dirs(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		if m.emulated {
			pids, err := readAllPids(d)
			if err == nil && len(pids) > 0 {
				errs = append(errs, fmt.Errorf("%w: %s: %v", ErrCgroupBusy, d, pids))
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := cgroups.RemovePath(d); err != nil {
			if errors.Is(err, unix.EBUSY) {
				err = fmt.Errorf("%w: %w", ErrCgroupBusy, err)
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing cgroup %s: %w", m.Name(name), errors.Join(errs...))
	}
	return nil
}

// Children lists the names of the cgroups directly below name (from the
// cpu hierarchy on v1), parsed in the driver's syntax; entries that don't
// parse are skipped.
func (m *CgroupManager) Children(name CgroupName) ([]CgroupName, error) {
	d := m.Path("cpu", name)
	if err := name.Validate(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []CgroupName
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		var child CgroupName
		if m.driver == DriverSystemd {
			child, err = ParseSystemd(e.Name())
			if err != nil || len(child) != len(name)+1 {
				continue
			}
		} else {
			child, err = NewCgroupName(name, e.Name())
			if err != nil {
				continue
			}
		}
		out = append(out, child)
	}
	return out, nil
}
