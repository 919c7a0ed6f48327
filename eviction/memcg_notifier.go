package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// ErrMemcgNotifier: the memcg notifier could not read or arm its cgroup;
// the wrapping error names the file.
var ErrMemcgNotifier = errors.New("eviction: memcg notifier")

var _ ThresholdNotifier = (*MemcgNotifier)(nil)

// DefaultMemcgPollInterval is how often a cgroup v2 MemcgNotifier reads
// the cgroup's memory files.
const DefaultMemcgPollInterval = 100 * time.Millisecond

// memcgDefaultRoot is where the cgroup file systems are mounted.
const memcgDefaultRoot = "/sys/fs/cgroup"

// MemcgNotifierConfig configures a MemcgNotifier.
type MemcgNotifierConfig struct {
	// Threshold is a memory.available or allocatableMemory.available
	// threshold (hard or soft).
	Threshold Threshold
	// Cgroup is the memory cgroup watched, relative to the memory
	// hierarchy's root: "" or "/" for the node (memory.available), the pods
	// cgroup such as "kubepods" or "kubepods.slice" for
	// allocatableMemory.available (required there).
	Cgroup string
	// CgroupRoot is where the cgroup file systems are mounted (default
	// "/sys/fs/cgroup"). A cgroup.controllers file there means the unified
	// (v2) hierarchy; otherwise the v1 memory controller is CgroupRoot/memory.
	CgroupRoot string
	// Layout, if set, is asked once, at the first UpdateThreshold, Poll
	// or Run, for the cgroup root (instead of CgroupRoot) and the pods
	// cgroup (instead of Cgroup, for allocatableMemory.available): for a
	// layout known only once another part has started, such as a
	// container manager (containermgr.Manager.MemoryCgroupPaths). Until it
	// answers, UpdateThreshold and Poll return its error and Run waits for
	// an UpdateThreshold that succeeds.
	Layout func() (root, podsCgroup string, err error)
	// Version forces the cgroup version (1 or 2); 0 detects it on first
	// use.
	Version int
	// PollInterval is the v2 polling period (default 100ms). v1 needs no
	// polling: the kernel signals an eventfd.
	PollInterval time.Duration
	Clock        clock.Clock
	Logger       *zap.Logger
}

// MemcgNotifier tells the eviction manager at once when a memory signal
// crosses its threshold, instead of at the next periodic cycle.
//
// Both versions watch the cgroup's working set (usage minus inactive file
// pages) against the crossing point capacity - threshold + 1, the smallest
// working set that leaves less than the threshold available, where
// capacity (available + working set) comes from the Summary given to
// UpdateThreshold.
//
// On cgroup v1 it registers an eventfd through cgroup.event_control on
// memory.usage_in_bytes at MemcgUsageThreshold (the crossing point plus
// the cgroup's total_inactive_file from memory.stat, rounded up to a
// page), as the kubelet does; the kernel signals it whenever usage
// crosses that value, in either direction, and Run calls trigger. The registration lives until
// UpdateThreshold moves it, Run returns, or Close. Moving it loses no
// crossing: a signal pending on the old eventfd, or usage found over the
// new value while it was below the old one, triggers too.
//
// On cgroup v2, which has no usage thresholds, Run polls every
// PollInterval (Poll): memory.current minus inactive_file (at the v2 root,
// which has no memory.current, anon + file from memory.stat) against the
// crossing point, and the high/max/oom/oom_kill counters of memory.events.
// It calls trigger when the working set goes from below to at or over the
// crossing point, and whenever a memory.events counter grows.
//
// It implements the manager's notifier interface: the manager calls
// UpdateThreshold with each cycle's stats and runs Run with its Trigger.
type MemcgNotifier struct {
	cfg  MemcgNotifierConfig
	log  *zap.Logger
	once lifecycle.Once

	// resolved is closed once cfg holds the Layout's answer.
	resolved chan struct{}

	mu      sync.Mutex
	laidOut bool  // cfg holds the Layout's answer
	version int   // 0 until detected
	cross   int64 // working set at which the threshold is crossed
	armed   bool  // cross (and usage, on v1) are set
	usage   int64 // v1: the usage_in_bytes threshold registered
	efd     int   // v1: the registered eventfd, or -1
	epfd    int   // v1: Run's epoll fd while running, or -1
	wake    int   // v1: Run's wake-up eventfd while running, or -1
	v1Over  bool  // v1: usage was at or over the threshold when last seen
	pending bool  // v1: a crossing found while re-arming, for Run
	over    bool  // v2: the last poll saw the working set at or over cross
	events  map[string]uint64
}

// NewMemcgNotifier validates cfg and fills its defaults. It does no I/O:
// the cgroup version is detected and the files are opened by
// UpdateThreshold, Poll and Run.
func NewMemcgNotifier(cfg MemcgNotifierConfig) (*MemcgNotifier, error) {
	var errs []error
	t := cfg.Threshold
	switch t.Signal {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
	default:
		errs = append(errs, fmt.Errorf("%w: Threshold: signal %q is not memory.available or allocatableMemory.available", ErrInvalidConfig, t.Signal))
	}
	if t.Value.Quantity == nil && (t.Value.Percentage <= 0 || t.Value.Percentage > 1) {
		errs = append(errs, fmt.Errorf("%w: Threshold: value %s is neither a quantity nor a percentage in (0,100%%]", ErrInvalidConfig, t.Value))
	} else if t.Value.Quantity != nil && t.Value.Quantity.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("%w: Threshold: quantity %s is not positive", ErrInvalidConfig, t.Value))
	}
	cg := strings.Trim(path.Clean("/"+cfg.Cgroup), "/")
	if slices.Contains(strings.Split(filepath.ToSlash(cfg.Cgroup), "/"), "..") {
		errs = append(errs, fmt.Errorf("%w: Cgroup %q has a \"..\" element", ErrInvalidConfig, cfg.Cgroup))
	}
	if t.Signal == SignalAllocatableMemoryAvailable && cg == "" && cfg.Layout == nil {
		errs = append(errs, fmt.Errorf("%w: Cgroup is empty: allocatableMemory.available watches the pods cgroup", ErrInvalidConfig))
	}
	if cfg.Version != 0 && cfg.Version != 1 && cfg.Version != 2 {
		errs = append(errs, fmt.Errorf("%w: Version %d is not 0, 1 or 2", ErrInvalidConfig, cfg.Version))
	}
	if cfg.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: PollInterval is negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg.Cgroup = cg
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = memcgDefaultRoot
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultMemcgPollInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &MemcgNotifier{
		cfg:      cfg,
		resolved: make(chan struct{}),
		log:      cfg.Logger.Named("eviction").Named("memcg").With(zap.Stringer("threshold", cfg.Threshold)),
		version:  cfg.Version,
		efd:      -1,
		epfd:     -1,
		wake:     -1,
	}, nil
}

// MemcgUsageThreshold is the cgroup v1 memory.usage_in_bytes value at
// which a cgroup of the given capacity has less than t's quantity
// available: capacity - threshold + 1 + inactiveFile (usage counts
// inactive file pages that the working set does not). The kernel signals
// when usage reaches the value, and a threshold is met only when
// available is strictly below it, so the value is one byte past the
// kubelet's capacity - threshold + inactiveFile, at which the cycle the
// signal starts would see available equal to the threshold and do
// nothing. It is never negative. The notifier registers it rounded up to
// a page (the kernel compares whole pages and would round it down).
func MemcgUsageThreshold(t Threshold, capacity, inactiveFile int64) int64 {
	return memcgCrossing(t, capacity) + max(inactiveFile, 0)
}

// memcgPageUp rounds v up to a multiple of page.
func memcgPageUp(v, page int64) int64 {
	if page <= 1 {
		return v
	}
	return (v + page - 1) / page * page
}

// memcgCrossing is the smallest working set at which t is met.
func memcgCrossing(t Threshold, capacity int64) int64 {
	return max(capacity-t.Value.QuantityOf(capacity)+1, 0)
}

// Armed returns the value the notifier is armed at — on v1 the
// memory.usage_in_bytes threshold registered, on v2 the working set at
// which it triggers — and whether it is armed.
func (n *MemcgNotifier) Armed() (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.version == 1 {
		return n.usage, n.armed && n.efd >= 0
	}
	return n.cross, n.armed
}

// dir is the watched cgroup's directory for version v.
func (n *MemcgNotifier) dir(v int) string {
	root := n.cfg.CgroupRoot
	if v == 1 {
		root = filepath.Join(root, "memory")
	}
	return filepath.Join(root, filepath.FromSlash(n.cfg.Cgroup))
}

// layOut takes the cgroup root and pods cgroup from cfg.Layout, once.
// Call with mu held.
func (n *MemcgNotifier) layOut() error {
	if n.laidOut || n.cfg.Layout == nil {
		return nil
	}
	root, pods, err := n.cfg.Layout()
	if err != nil {
		return fmt.Errorf("%w: cgroup layout: %w", ErrMemcgNotifier, err)
	}
	if !filepath.IsAbs(root) {
		return fmt.Errorf("%w: cgroup layout: root %q is not absolute", ErrInvalidConfig, root)
	}
	if n.cfg.Threshold.Signal == SignalAllocatableMemoryAvailable {
		cg := strings.Trim(path.Clean("/"+pods), "/")
		if cg == "" || slices.Contains(strings.Split(filepath.ToSlash(pods), "/"), "..") {
			return fmt.Errorf("%w: cgroup layout: pods cgroup %q is not a cgroup below the root", ErrInvalidConfig, pods)
		}
		n.cfg.Cgroup = cg
	}
	n.cfg.CgroupRoot = root
	n.laidOut = true
	close(n.resolved)
	return nil
}

// detect returns the cgroup version, detecting it once. Call with mu held.
func (n *MemcgNotifier) detect() int {
	if n.version == 0 {
		n.version = 1
		if _, err := os.Stat(filepath.Join(n.cfg.CgroupRoot, "cgroup.controllers")); err == nil {
			n.version = 2
		}
	}
	return n.version
}

// UpdateThreshold re-arms the notifier from this cycle's stats: the
// Memory (memory.available) or AllocatableMemory
// (allocatableMemory.available) of s gives the capacity. On v1 it also
// reads total_inactive_file from the cgroup's memory.stat and registers a
// new eventfd when the usage threshold changed (closing the old one).
func (n *MemcgNotifier) UpdateThreshold(s *Summary) error {
	if s == nil {
		return fmt.Errorf("%w: nil summary", ErrStats)
	}
	ms := s.Memory
	if n.cfg.Threshold.Signal == SignalAllocatableMemoryAvailable {
		ms = s.AllocatableMemory
	}
	if ms == nil {
		return fmt.Errorf("%w: the summary has no memory stats for %s", ErrStats, n.cfg.Threshold.Signal)
	}
	capacity := int64(min(ms.AvailableBytes+ms.WorkingSetBytes, 1<<62))
	cross := memcgCrossing(n.cfg.Threshold, capacity)

	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.layOut(); err != nil {
		return err
	}
	v := n.detect()
	if v == 2 {
		if !n.armed || n.cross != cross {
			n.log.Debug("armed", zap.Int64("workingSetBytes", cross), zap.Int64("capacityBytes", capacity))
		}
		n.cross, n.armed = cross, true
		return nil
	}
	dir := n.dir(1)
	st, err := memcgReadKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return err
	}
	// The kernel counts usage in pages and rounds a threshold down to a
	// page: register the next page boundary, so that usage reaching it
	// means the working set is past cross.
	usage := memcgPageUp(cross+int64(min(st["total_inactive_file"], 1<<61)), int64(os.Getpagesize()))
	if n.armed && n.efd >= 0 && n.usage == usage {
		return nil
	}
	efd, err := memcgRegister(dir, usage)
	if err != nil {
		return err
	}
	if n.epfd >= 0 {
		if err := memcgEpollAdd(n.epfd, efd); err != nil {
			memcgClose(efd)
			return fmt.Errorf("%w: adding the eventfd of %s to epoll: %w", ErrMemcgNotifier, dir, err)
		}
	}
	// A crossing can fall between two registrations: signalled to the old
	// eventfd and not read yet, or between the old and the new value (or
	// during the switch) so that neither eventfd sees it. Catch both, so
	// that moving the threshold never loses a crossing; the first
	// registration only records where usage is.
	lost := false
	if n.efd >= 0 {
		c, _ := memcgDrain(n.efd)
		memcgClose(n.efd) // closing it also removes it from the epoll set
		lost = c > 0
	}
	if cur, err := memcgReadUint(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		over := cur >= uint64(usage)
		lost = lost || (n.armed && over && !n.v1Over)
		n.v1Over = over
	}
	if lost {
		n.pending = true
		memcgWake(n.wake)
	}
	n.efd, n.usage, n.cross, n.armed = efd, usage, cross, true
	n.log.Debug("armed", zap.String("cgroup", dir), zap.Int64("usageBytes", usage), zap.Int64("capacityBytes", capacity))
	return nil
}

// Close releases the v1 eventfd registration, if any. UpdateThreshold
// arms the notifier again.
func (n *MemcgNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.disarmLocked()
	return nil
}

func (n *MemcgNotifier) disarmLocked() {
	if n.efd >= 0 {
		memcgClose(n.efd)
		n.efd = -1
	}
	if n.version == 1 {
		n.armed = false
	}
}

// Poll reads the cgroup once and reports whether a crossing happened since
// the last Poll: the working set went from below the crossing point to at
// or over it, or a memory.events counter (high, max, oom, oom_kill) grew
// (v2). The first Poll only records the counters. Run calls it on v2; on
// v1 it reads memory.usage_in_bytes and total_inactive_file, so it can
// serve as a fallback there too.
func (n *MemcgNotifier) Poll() (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.layOut(); err != nil {
		return false, err
	}
	v := n.detect()
	dir := n.dir(v)
	fired := false
	if n.armed {
		ws, err := memcgWorkingSet(dir, v, n.cfg.Cgroup == "")
		if err != nil {
			return false, err
		}
		over := ws >= n.cross
		fired = over && !n.over
		n.over = over
	}
	if v == 2 {
		ev, err := memcgReadKeyValues(filepath.Join(dir, "memory.events"))
		switch {
		case err == nil:
			for _, k := range []string{"high", "max", "oom", "oom_kill"} {
				if prev, ok := n.events[k]; ok && ev[k] > prev {
					fired = true
				}
			}
			n.events = ev
		case errors.Is(err, os.ErrNotExist):
			// The v2 root has no memory.events.
		default:
			return fired, err
		}
	}
	return fired, nil
}

// memcgWorkingSet is usage minus inactive file pages of the cgroup dir.
func memcgWorkingSet(dir string, v int, root bool) (int64, error) {
	st, err := memcgReadKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var usage, inactive uint64
	switch {
	case v == 1:
		if usage, err = memcgReadUint(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
			return 0, err
		}
		inactive = st["total_inactive_file"]
	case root:
		anon, okA := st["anon"]
		file, okF := st["file"]
		if !okA || !okF {
			return 0, fmt.Errorf("%w: %s has no anon or file", ErrMemcgNotifier, filepath.Join(dir, "memory.stat"))
		}
		usage, inactive = anon+file, st["inactive_file"]
	default:
		if usage, err = memcgReadUint(filepath.Join(dir, "memory.current")); err != nil {
			return 0, err
		}
		inactive = st["inactive_file"]
	}
	if usage < inactive {
		return 0, nil
	}
	return int64(min(usage-inactive, 1<<62)), nil
}

// Run calls trigger on each crossing until ctx is done, then releases the
// v1 registration and returns nil once its goroutines have exited.
// On v1 it waits on the kernel's eventfd; on v2 it polls every
// PollInterval. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (n *MemcgNotifier) Run(ctx context.Context, trigger func()) error {
	if trigger == nil {
		return fmt.Errorf("%w: Run: trigger is nil", ErrInvalidConfig)
	}
	if err := n.once.Start(); err != nil {
		return err
	}
	n.mu.Lock()
	lerr := n.layOut()
	n.mu.Unlock()
	if lerr != nil && n.cfg.Layout != nil {
		select { // an UpdateThreshold lays the cgroups out
		case <-ctx.Done():
			return nil
		case <-n.resolved:
		}
	}
	n.mu.Lock()
	v := n.detect()
	n.mu.Unlock()
	var err error
	if v == 1 {
		err = n.runEventfd(ctx, trigger)
	} else {
		err = n.runPoll(ctx, trigger)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // a clean stop
	}
	return err
}

func (n *MemcgNotifier) runPoll(ctx context.Context, trigger func()) error {
	var lastErr string
	for {
		fired, err := n.Poll()
		if err != nil && err.Error() != lastErr {
			n.log.Warn("reading the memory cgroup", zap.Error(err))
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		if fired {
			trigger()
		}
		t := n.cfg.Clock.NewTimer(n.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// memcgReadUint reads a file holding one unsigned number ("max" is an
// error).
func memcgReadUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrMemcgNotifier, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrMemcgNotifier, file, err)
	}
	return v, nil
}

// memcgReadKeyValues reads a "key value" per line file (memory.stat,
// memory.events); lines that do not parse are skipped.
func memcgReadKeyValues(file string) (map[string]uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMemcgNotifier, err)
	}
	out := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
