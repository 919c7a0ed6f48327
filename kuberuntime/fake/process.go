package fake

import (
	"fmt"
	"math"
	"math/bits"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BehaviorAnnotationPrefix starts the annotation that scripts a container's
// simulated process: BehaviorAnnotationPrefix + container name. It may be
// set on the ContainerConfig or on the PodSandboxConfig (pod annotations);
// the container's own wins. See the package documentation for the syntax.
const BehaviorAnnotationPrefix = "fake.nodekit.io/behavior."

// BehaviorAnnotation is the annotation key that scripts the named container.
func BehaviorAnnotation(containerName string) string { return BehaviorAnnotationPrefix + containerName }

// SigtermMode is how a simulated process reacts to SIGTERM.
type SigtermMode int

const (
	// SigtermIgnore: the process ignores SIGTERM (as PID 1 without a handler
	// does); StopContainer kills it when the timeout passes (exit 137).
	SigtermIgnore SigtermMode = iota
	// SigtermHandle: the process exits at once on StopContainer with TermExitCode.
	SigtermHandle
)

// Behavior is the resolved script of a simulated container process.
type Behavior struct {
	// Exits is true when the process ends on its own, After its start, with ExitCode.
	Exits    bool
	After    time.Duration
	ExitCode int32
	// Sigterm and TermExitCode say what StopContainer with a timeout does.
	Sigterm      SigtermMode
	TermExitCode int32
	// MemoryBytes is the working set at start; MemoryGrowth is added per second
	// of running. Reaching the container's memory limit kills it (OOMKilled, 137).
	MemoryBytes  uint64
	MemoryGrowth uint64
	// CPUMillicores is the CPU the process burns while running.
	CPUMillicores uint64
}

// String renders the behaviour in the annotation syntax.
func (b Behavior) String() string {
	var parts []string
	if b.Exits {
		parts = append(parts, "exit="+strconv.Itoa(int(b.ExitCode)), "after="+b.After.String())
	} else {
		parts = append(parts, "run=forever")
	}
	if b.Sigterm == SigtermHandle {
		parts = append(parts, "sigterm=handle:"+strconv.Itoa(int(b.TermExitCode)))
	} else {
		parts = append(parts, "sigterm=ignore")
	}
	parts = append(parts, fmt.Sprintf("memory=%d+%d/s", b.MemoryBytes, b.MemoryGrowth), fmt.Sprintf("cpu=%dm", b.CPUMillicores))
	return strings.Join(parts, ",")
}

// bfield marks which fields of a patch are set.
type bfield uint16

const (
	fExits bfield = 1 << iota
	fAfter
	fExitCode
	fSigterm
	fTermCode
	fMemory
	fGrowth
	fCPU
)

// patch is a partial behaviour: one layer (image table, interpreter, annotation).
type patch struct {
	b   Behavior
	set bfield
}

func (p patch) apply(b *Behavior) {
	if p.set&fExits != 0 {
		b.Exits = p.b.Exits
	}
	if p.set&fAfter != 0 {
		b.After = p.b.After
	}
	if p.set&fExitCode != 0 {
		b.ExitCode = p.b.ExitCode
	}
	if p.set&fSigterm != 0 {
		b.Sigterm = p.b.Sigterm
	}
	if p.set&fTermCode != 0 {
		b.TermExitCode = p.b.TermExitCode
	}
	if p.set&fMemory != 0 {
		b.MemoryBytes = p.b.MemoryBytes
	}
	if p.set&fGrowth != 0 {
		b.MemoryGrowth = p.b.MemoryGrowth
	}
	if p.set&fCPU != 0 {
		b.CPUMillicores = p.b.CPUMillicores
	}
}

func exitPatch(after time.Duration, code int32) patch {
	return patch{b: Behavior{Exits: true, After: after, ExitCode: code}, set: fExits | fAfter | fExitCode}
}

func foreverPatch() patch { return patch{set: fExits} }

func (p patch) withSigterm(mode SigtermMode, code int32) patch {
	p.b.Sigterm, p.b.TermExitCode = mode, code
	p.set |= fSigterm | fTermCode
	return p
}

const maxBehaviorLen = 1024

// parseBehavior parses the annotation syntax: comma-separated key=value items.
func parseBehavior(s string) (patch, error) {
	var p patch
	if len(s) > maxBehaviorLen {
		return p, fmt.Errorf("behavior longer than %d bytes", maxBehaviorLen)
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || val == "" {
			return p, fmt.Errorf("behavior item %q: want key=value", item)
		}
		switch key {
		case "run":
			if val != "forever" {
				return p, fmt.Errorf("behavior run=%q: only run=forever", val)
			}
			p.b.Exits = false
			p.set |= fExits
		case "exit":
			code, err := parseExitCode(val)
			if err != nil {
				return p, fmt.Errorf("behavior exit=%q: %w", val, err)
			}
			p.b.Exits, p.b.ExitCode = true, code
			p.set |= fExits | fExitCode
		case "after":
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				return p, fmt.Errorf("behavior after=%q: want a non-negative duration like 2s", val)
			}
			p.b.Exits, p.b.After = true, d
			p.set |= fExits | fAfter
		case "sigterm":
			mode, code, err := parseSigterm(val)
			if err != nil {
				return p, fmt.Errorf("behavior sigterm=%q: %w", val, err)
			}
			p = p.withSigterm(mode, code)
		case "memory":
			base, growth, hasBase, hasGrowth, err := parseMemory(val)
			if err != nil {
				return p, fmt.Errorf("behavior memory=%q: %w", val, err)
			}
			if hasBase {
				p.b.MemoryBytes = base
				p.set |= fMemory
			}
			if hasGrowth {
				p.b.MemoryGrowth = growth
				p.set |= fGrowth
			}
		case "cpu":
			q, err := parseQuantity(val)
			if err != nil {
				return p, fmt.Errorf("behavior cpu=%q: %w", val, err)
			}
			p.b.CPUMillicores = uint64(q.MilliValue())
			p.set |= fCPU
		default:
			return p, fmt.Errorf("behavior key %q unknown (want run, exit, after, sigterm, memory, cpu)", key)
		}
	}
	return p, nil
}

func parseExitCode(s string) (int32, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("want an exit code 0-255")
	}
	return int32(n), nil
}

func parseSigterm(s string) (SigtermMode, int32, error) {
	mode, codeStr, hasCode := strings.Cut(s, ":")
	switch mode {
	case "ignore":
		if hasCode {
			return 0, 0, fmt.Errorf("ignore takes no exit code")
		}
		return SigtermIgnore, 0, nil
	case "handle":
		if !hasCode {
			return SigtermHandle, 0, nil
		}
		code, err := parseExitCode(codeStr)
		return SigtermHandle, code, err
	}
	return 0, 0, fmt.Errorf("want ignore, handle or handle:<code>")
}

// parseMemory reads "Q", "R/s" or "Q+R/s".
func parseMemory(s string) (base, growth uint64, hasBase, hasGrowth bool, err error) {
	for _, part := range strings.Split(s, "+") {
		part = strings.TrimSpace(part)
		if rate, ok := strings.CutSuffix(part, "/s"); ok {
			if hasGrowth {
				return 0, 0, false, false, fmt.Errorf("two growth rates")
			}
			q, err := parseQuantity(rate)
			if err != nil {
				return 0, 0, false, false, err
			}
			growth, hasGrowth = uint64(q.Value()), true
			continue
		}
		if hasBase {
			return 0, 0, false, false, fmt.Errorf("two base sizes")
		}
		q, err := parseQuantity(part)
		if err != nil {
			return 0, 0, false, false, err
		}
		base, hasBase = uint64(q.Value()), true
	}
	return base, growth, hasBase, hasGrowth, nil
}

// parseQuantity parses a short, non-negative, bounded resource quantity.
func parseQuantity(s string) (resource.Quantity, error) {
	if len(s) > 32 {
		return resource.Quantity{}, fmt.Errorf("quantity too long")
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789.munkMGTPEi", r) {
			return resource.Quantity{}, fmt.Errorf("quantity %q: unexpected %q", s, r)
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, err
	}
	if q.Sign() < 0 || q.Cmp(resource.MustParse("1Pi")) > 0 {
		return q, fmt.Errorf("quantity %q out of range", s)
	}
	return q, nil
}

// interpret reads the common busybox command forms. ok is false when the
// command is not one it knows (the caller falls back to the image table and
// the default).
func interpret(command, args []string) (patch, bool) {
	argv := make([]string, 0, len(command)+len(args))
	argv = append(argv, command...)
	argv = append(argv, args...)
	if len(argv) > 0 && path.Base(argv[0]) == "busybox" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return patch{}, false
	}
	switch path.Base(argv[0]) {
	case "true":
		return exitPatch(0, 0), true
	case "false":
		return exitPatch(0, 1), true
	case "sleep":
		d, forever, ok := sleepArgs(argv[1:])
		if !ok {
			return patch{}, false
		}
		// busybox sleep dies of SIGTERM even as PID 1 (measured on
		// containerd 1.6 + runc 1.1: exit 143 within ~100ms).
		if forever {
			return foreverPatch().withSigterm(SigtermHandle, 143), true
		}
		return exitPatch(d, 0).withSigterm(SigtermHandle, 143), true
	case "sh", "ash", "bash", "dash":
		if len(argv) >= 3 && strings.HasPrefix(argv[1], "-") && strings.Contains(argv[1], "c") {
			return interpretScript(argv[2])
		}
	}
	return patch{}, false
}

// maxSleep is where a sleep counts as forever.
const maxSleep = 100 * 365 * 24 * time.Hour

// sleepArgs sums busybox sleep arguments (N, N.5, Ns, Nm, Nh, Nd, infinity).
func sleepArgs(args []string) (d time.Duration, forever, ok bool) {
	if len(args) == 0 {
		return 0, false, false
	}
	var total float64
	for _, a := range args {
		if a == "infinity" || a == "inf" {
			return 0, true, true
		}
		mult := 1.0
		switch {
		case strings.HasSuffix(a, "s"):
			a = strings.TrimSuffix(a, "s")
		case strings.HasSuffix(a, "m"):
			a, mult = strings.TrimSuffix(a, "m"), 60
		case strings.HasSuffix(a, "h"):
			a, mult = strings.TrimSuffix(a, "h"), 3600
		case strings.HasSuffix(a, "d"):
			a, mult = strings.TrimSuffix(a, "d"), 86400
		}
		f, err := strconv.ParseFloat(a, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || len(a) > 20 {
			return 0, false, false
		}
		total += f * mult
	}
	if total*float64(time.Second) >= float64(maxSleep) {
		return 0, true, true
	}
	return time.Duration(total * float64(time.Second)), false, true
}

// instantCommand: shell commands that finish at once with status 0.
func instantCommand(name string) bool {
	switch name {
	case "true", ":", "echo", "printf", "touch", "mkdir", "cat", "test", "[", "ls", "date", "env",
		"rm", "cp", "mv", "ln", "chmod", "chown", "export", "set", "hostname", "id", "pwd", "cd", "tee",
		"wc", "grep", "head", "tail", "sync", "ulimit", "umask", "unset", "whoami", "uname":
		return true
	}
	return false
}

type stmt struct {
	words      []string
	background bool
}

// interpretScript simulates a `sh -c` script: sleeps add up, `exit N` ends it,
// `trap ... TERM` makes it handle SIGTERM, `sleep N &` + `wait` waits for the
// background sleep, known instant commands take no time, and anything else
// (loops, servers, unknown programs) keeps it running forever.
func interpretScript(script string) (patch, bool) {
	stmts, ok := splitScript(script)
	if !ok {
		return patch{}, false
	}
	var (
		elapsed, bgMax time.Duration
		bgForever      bool
		handles        bool
		termCode       int32
		last           int32
	)
	finish := func(p patch) (patch, bool) {
		if handles {
			return p.withSigterm(SigtermHandle, termCode), true
		}
		return p.withSigterm(SigtermIgnore, 0), true
	}
	for _, st := range stmts {
		w := st.words
		switch name := path.Base(w[0]); {
		case name == "trap":
			if len(w) >= 3 && trapsTerm(w[2:]) {
				// trap '' TERM ignores the signal; trap - TERM resets it
				// (a shell as PID 1 then ignores it too).
				action := strings.TrimSpace(w[1])
				handles = action != "" && action != "-"
				termCode = trapExitCode(action)
			}
			last = 0
		case name == "sleep":
			d, forever, ok := sleepArgs(w[1:])
			if !ok {
				return patch{}, false
			}
			switch {
			case st.background && forever:
				bgForever = true
			case st.background:
				bgMax = max(bgMax, elapsed+d)
			case forever:
				// A shell runs its trap only after the foreground command
				// ends: a foreground endless sleep never lets it run.
				return foreverPatch().withSigterm(SigtermIgnore, 0), true
			default:
				elapsed += d
			}
			last = 0
		case name == "exit":
			code := last
			if len(w) > 1 {
				if c, err := parseExitCode(w[1]); err == nil {
					code = c
				} else {
					code = 0
				}
			}
			return finish(exitPatch(elapsed, code))
		case name == "wait":
			if bgForever {
				return finish(foreverPatch())
			}
			elapsed = max(elapsed, bgMax)
			last = 0
		case name == "false":
			last = 1
		case name == "exec" && len(w) > 1:
			// exec replaces the shell: interpret the rest as the command.
			// Statements after it never run.
			p, ok := interpret(w[1:], nil)
			if !ok {
				return finish(foreverPatch())
			}
			if p.set&fAfter != 0 {
				p.b.After += elapsed
			}
			return p, true // exec'd program is PID 1: its own SIGTERM handling
		case instantCommand(name):
			last = 0
		default:
			return finish(foreverPatch())
		}
	}
	return finish(exitPatch(elapsed, last))
}

func trapsTerm(sigs []string) bool {
	for _, s := range sigs {
		switch strings.ToUpper(s) {
		case "TERM", "SIGTERM", "15":
			return true
		}
	}
	return false
}

// trapExitCode finds `exit N` in a trap action; 0 if none.
func trapExitCode(action string) int32 {
	f := strings.Fields(strings.ReplaceAll(action, ";", " ; "))
	for i, w := range f {
		if w == "exit" && i+1 < len(f) {
			if c, err := parseExitCode(f[i+1]); err == nil {
				return c
			}
		}
	}
	return 0
}

// splitScript splits a shell script into statements at ; & && || and
// newlines, outside quotes, and each statement into words (quotes removed).
// ok is false for unbalanced quotes.
func splitScript(s string) ([]stmt, bool) {
	var (
		out   []stmt
		words []string
		word  strings.Builder
		inW   bool
		quote rune
	)
	endWord := func() {
		if inW {
			words = append(words, word.String())
			word.Reset()
			inW = false
		}
	}
	endStmt := func(bg bool) {
		endWord()
		if len(words) > 0 {
			out = append(out, stmt{words: words, background: bg})
		}
		words = nil
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if quote != 0 {
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
			continue
		}
		switch r {
		case '\'', '"':
			quote, inW = r, true
		case ' ', '\t':
			endWord()
		case ';', '\n':
			endStmt(false)
		case '|':
			if i+1 < len(rs) && rs[i+1] == '|' {
				i++
			}
			endStmt(false)
		case '&':
			if i+1 < len(rs) && rs[i+1] == '&' {
				i++
				endStmt(false)
			} else {
				endStmt(true)
			}
		default:
			word.WriteRune(r)
			inW = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	endStmt(false)
	return out, true
}

// mulDiv is a*b/d without overflow, saturating at MaxUint64.
func mulDiv(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// runningNanos is how long the process has run by now.
func (c *container) runningNanos(now int64) uint64 {
	switch c.state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return uint64(max(now-c.startedAt, 0))
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		if c.startedAt > 0 {
			return uint64(max(c.finishedAt-c.startedAt, 0))
		}
	}
	return 0
}

// memoryAt is the working set of a running process at now (capped at its limit).
func (c *container) memoryAt(now int64) uint64 {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0
	}
	m := c.behavior.MemoryBytes
	if g := c.behavior.MemoryGrowth; g > 0 {
		add := mulDiv(c.runningNanos(now), g, uint64(time.Second))
		if m+add < m {
			m = math.MaxUint64
		} else {
			m += add
		}
	}
	if l := c.resources.GetMemoryLimitInBytes(); l > 0 && m > uint64(l) {
		m = uint64(l)
	}
	return m
}

// cpuAt is the CPU time, in core-nanoseconds, used by now.
func (c *container) cpuAt(now int64) uint64 {
	return mulDiv(c.runningNanos(now), c.behavior.CPUMillicores, 1000)
}

// oomAt is when the working set reaches the memory limit.
func (c *container) oomAt() (int64, bool) {
	limit := c.resources.GetMemoryLimitInBytes()
	if limit <= 0 {
		return 0, false
	}
	b, l := c.behavior, uint64(limit)
	if b.MemoryBytes >= l {
		return max(c.startedAt, c.limitSince), true
	}
	if b.MemoryGrowth == 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(l-b.MemoryBytes, uint64(time.Second))
	if hi >= b.MemoryGrowth {
		return 0, false
	}
	ns, rem := bits.Div64(hi, lo, b.MemoryGrowth)
	if rem > 0 {
		ns++
	}
	if ns > math.MaxInt64/2 {
		return 0, false
	}
	return max(c.startedAt+int64(ns), c.limitSince), true
}

// nextExit is the next exit of a running process: a natural exit, an OOM
// kill or the end of a pending stop's timeout, whichever comes first.
func (c *container) nextExit() (at int64, code int32, reason string, ok bool) {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, 0, "", false
	}
	if b := c.behavior; b.Exits {
		at, code, ok = c.startedAt+int64(min(b.After, maxSleep)), b.ExitCode, true
	}
	if t, oom := c.oomAt(); oom && (!ok || t < at) {
		at, code, reason, ok = t, 137, "OOMKilled", true
	}
	if c.killAt != 0 && (!ok || c.killAt < at) {
		at, code, reason, ok = c.killAt, 137, "", true
	}
	return at, code, reason, ok
}

// advanceLocked brings a container's state up to now.
func (r *Runtime) advanceLocked(c *container, now int64) {
	if at, code, reason, ok := c.nextExit(); ok && at <= now {
		r.finishLocked(c, at, code, reason, "")
	}
}

func (r *Runtime) advanceAllLocked(now int64) {
	for _, c := range r.containerOrder {
		r.advanceLocked(c, now)
	}
}

// nextTransitionLocked is the earliest pending exit of any running container.
func (r *Runtime) nextTransitionLocked() (int64, bool) {
	var next int64
	found := false
	for _, c := range r.containerOrder {
		if at, _, _, ok := c.nextExit(); ok && (!found || at < next) {
			next, found = at, true
		}
	}
	return next, found
}

// finishLocked makes a container EXITED at the given time.
func (r *Runtime) finishLocked(c *container, at int64, code int32, reason, message string) {
	if reason == "" {
		reason = "Error"
		if code == 0 {
			reason = "Completed"
		}
	}
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.closeLogLocked()
	c.finishedAt, c.exitCode, c.reason, c.message, c.killAt = at, code, reason, message, 0
	r.log.Debug("container exited", zap.String("id", c.id), zap.String("name", c.meta.Name), zap.Int32("exitCode", code), zap.String("reason", reason))
	r.publishLocked(c.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, at, c.sb)
}
