package eviction

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names a resource the manager watches.
type Signal string

// The signals, spelled as in the kubelet's --eviction-hard flag.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

// Signals lists every known signal in a fixed order (memory first).
func Signals() []Signal {
	return []Signal{
		SignalMemoryAvailable, SignalAllocatableMemoryAvailable,
		SignalNodeFsAvailable, SignalNodeFsInodesFree,
		SignalImageFsAvailable, SignalImageFsInodesFree,
		SignalContainerFsAvailable, SignalContainerFsInodesFree,
		SignalPIDAvailable,
	}
}

// Valid reports whether s is a known signal.
func (s Signal) Valid() bool { return signalRank(s) >= 0 }

// signalRank is the position of s in Signals, or -1.
func signalRank(s Signal) int {
	for i, k := range Signals() {
		if k == s {
			return i
		}
	}
	return -1
}

// Operator compares an observation with a threshold.
type Operator string

// OpLessThan: the threshold is met when the available amount is less than
// the threshold's quantity. It is the only operator.
const OpLessThan Operator = "LessThan"

// ThresholdValue is either an absolute Quantity or a Percentage (0..1] of
// the signal's capacity. Exactly one is set.
type ThresholdValue struct {
	Quantity   *resource.Quantity
	Percentage float32
}

// QuantityOf returns the value as an absolute quantity for a signal whose
// capacity is capacity.
func (v ThresholdValue) QuantityOf(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

// String prints the value as it would be written in a flag.
func (v ThresholdValue) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	// Six significant digits: the float32 of 15% is 15.0000006%.
	return strconv.FormatFloat(float64(v.Percentage)*100, 'g', 6, 64) + "%"
}

// Threshold is one eviction threshold. A zero GracePeriod makes it hard.
type Threshold struct {
	Signal      Signal
	Operator    Operator
	Value       ThresholdValue
	GracePeriod time.Duration
	MinReclaim  *ThresholdValue
}

// IsHard reports whether the threshold acts at once (no grace period).
func (t Threshold) IsHard() bool { return t.GracePeriod == 0 }

// String prints e.g. "memory.available<100Mi" or
// "nodefs.available<10% grace=1m30s".
func (t Threshold) String() string {
	s := string(t.Signal) + "<" + t.Value.String()
	if t.GracePeriod > 0 {
		s += " grace=" + t.GracePeriod.String()
	}
	if t.MinReclaim != nil {
		s += " minReclaim=" + t.MinReclaim.String()
	}
	return s
}

// key identifies a threshold for the manager's bookkeeping.
func (t Threshold) key() string {
	return fmt.Sprintf("%s|%s|%d", t.Signal, t.Value.String(), t.GracePeriod)
}

// DefaultHard returns the kubelet's default hard thresholds (a new map).
func DefaultHard() map[string]string {
	return map[string]string{
		string(SignalMemoryAvailable):   "100Mi",
		string(SignalNodeFsAvailable):   "10%",
		string(SignalNodeFsInodesFree):  "5%",
		string(SignalImageFsAvailable):  "15%",
		string(SignalImageFsInodesFree): "5%",
	}
}

// DefaultThresholds returns DefaultHard parsed.
func DefaultThresholds() []Threshold {
	t, err := ParseThresholds(DefaultHard(), nil, nil, nil)
	if err != nil { // the defaults are constant; this cannot happen
		return nil
	}
	return t
}

// Bounds applied before any number is parsed.
const (
	maxStatementLen = 64
	maxExponent     = 30 // |decimal exponent| of a quantity
)

// scanDecimal splits s into a signed decimal number (digits with an
// optional fraction) and the rest; ok is false when s does not start with one.
func scanDecimal(s string) (rest string, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	return s[i:], digits > 0
}

// quantitySuffix checks the suffix of a quantity (binary, SI or a decimal
// exponent) and returns its exponent when it is one.
func quantitySuffix(s string) (exp int, isExp, ok bool) {
	switch s {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E":
		return 0, false, true
	}
	if s[0] != 'e' && s[0] != 'E' {
		return 0, false, false
	}
	d := s[1:]
	if d != "" && (d[0] == '+' || d[0] == '-') {
		d = d[1:]
	}
	if d == "" || strings.Trim(d, "0123456789") != "" {
		return 0, false, false
	}
	if len(d) > 4 { // far out of range; don't convert it
		return maxExponent + 1, true, true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s[1:], "+"))
	if err != nil {
		return 0, false, false
	}
	return n, true, true
}

func invalid(signal, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidThreshold, signal, fmt.Sprintf(format, args...))
}

// parseQuantity bounds and parses a quantity statement.
func parseQuantity(signal, val string) (resource.Quantity, error) {
	if len(val) > maxStatementLen {
		return resource.Quantity{}, invalid(signal, "value is %d bytes long (at most %d)", len(val), maxStatementLen)
	}
	rest, ok := scanDecimal(val)
	if !ok {
		return resource.Quantity{}, invalid(signal, "%q is not a quantity or a percentage", val)
	}
	exp, isExp, ok := quantitySuffix(rest)
	if !ok {
		return resource.Quantity{}, invalid(signal, "%q is not a quantity or a percentage", val)
	}
	if isExp && (exp > maxExponent || exp < -maxExponent) {
		return resource.Quantity{}, invalid(signal, "exponent of %q is out of range (|e| <= %d)", val, maxExponent)
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return resource.Quantity{}, invalid(signal, "%q: %v", val, err)
	}
	if q.AsApproximateFloat64() >= math.MaxInt64 {
		return resource.Quantity{}, invalid(signal, "%q is too large", val)
	}
	return q, nil
}

// parsePercent bounds and parses "n%" into a fraction.
func parsePercent(signal, val string) (float32, error) {
	if len(val) > maxStatementLen {
		return 0, invalid(signal, "value is %d bytes long (at most %d)", len(val), maxStatementLen)
	}
	num := strings.TrimSuffix(val, "%")
	if rest, ok := scanDecimal(num); !ok || rest != "" {
		return 0, invalid(signal, "%q is not a percentage", val)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalid(signal, "%q is not a percentage", val)
	}
	p := float32(f / 100)
	// float32 has about seven digits: 99.999999999% would become exactly
	// 100% and silently disable the threshold. Only values written as 0%
	// or 100% may mean "disabled".
	if (p == 0 && f != 0) || (p == 1 && f != 100) {
		return 0, invalid(signal, "%q rounds to %v%%; write 0%% or 100%% to disable the threshold, or use fewer digits", val, float64(p)*100)
	}
	return p, nil
}

// parseThreshold parses one hard or soft statement; nil, nil means the
// statement disables the threshold (0% or 100%).
func parseThreshold(log *zap.Logger, signal, val string) (*Threshold, error) {
	if !Signal(signal).Valid() {
		return nil, fmt.Errorf("%w: unsupported eviction signal %q", ErrInvalidThreshold, signal)
	}
	t := &Threshold{Signal: Signal(signal), Operator: OpLessThan}
	if strings.HasSuffix(val, "%") {
		p, err := parsePercent(signal, val)
		if err != nil {
			return nil, err
		}
		if p < 0 {
			return nil, invalid(signal, "percentage %s must be >= 0%%", val)
		}
		if p > 1 {
			return nil, invalid(signal, "percentage %s must be <= 100%%", val)
		}
		if p == 0 || p == 1 {
			log.Info("eviction threshold disabled", zap.String("signal", signal), zap.String("value", val))
			return nil, nil
		}
		t.Value.Percentage = p
		return t, nil
	}
	q, err := parseQuantity(signal, val)
	if err != nil {
		return nil, err
	}
	if q.Sign() <= 0 {
		return nil, invalid(signal, "threshold %s must be positive", q.String())
	}
	t.Value.Quantity = &q
	return t, nil
}

// ParseThresholds parses the kubelet's four eviction flags: hard and soft
// thresholds (signal -> quantity or percentage), soft grace periods (signal
// -> duration) and minimum reclaims (signal -> quantity or percentage).
//
// The rules are the kubelet's: an unknown signal, a percentage below 0% or
// above 100%, a quantity that is not positive, or text that is neither is an
// error; a soft threshold needs a grace period; "0%" and "100%" disable the
// threshold (logged, not an error). Beyond the kubelet, values are bounded
// before they are parsed: NaN, Inf, hex floats, exponents beyond ±30 and
// statements longer than 64 bytes are errors naming the signal, never a hang
// or a silently disabled threshold.
//
// The result is sorted: hard thresholds first, then soft, each in Signals
// order.
func ParseThresholds(hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	return ParseThresholdsLogged(nil, hard, soft, softGrace, minReclaim)
}

// ParseThresholdsLogged is ParseThresholds with a logger for disabled
// thresholds (nil logs nothing).
func ParseThresholdsLogged(log *zap.Logger, hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	if log == nil {
		log = zap.NewNop()
	}
	var out []Threshold
	hardT, err := parseStatements(log, hard)
	if err != nil {
		return nil, err
	}
	softT, err := parseStatements(log, soft)
	if err != nil {
		return nil, err
	}
	graces := map[Signal]time.Duration{}
	for _, sig := range sortedKeys(softGrace) {
		val := softGrace[sig]
		if !Signal(sig).Valid() {
			return nil, fmt.Errorf("%w: unsupported eviction signal %q in grace periods", ErrInvalidThreshold, sig)
		}
		if len(val) > maxStatementLen {
			return nil, invalid(sig, "grace period is %d bytes long (at most %d)", len(val), maxStatementLen)
		}
		d, err := time.ParseDuration(val)
		if err != nil {
			return nil, invalid(sig, "grace period %q: %v", val, err)
		}
		if d < 0 {
			return nil, invalid(sig, "grace period %s must not be negative", val)
		}
		graces[Signal(sig)] = d
	}
	reclaims := map[Signal]ThresholdValue{}
	for _, sig := range sortedKeys(minReclaim) {
		val := minReclaim[sig]
		if !Signal(sig).Valid() {
			return nil, fmt.Errorf("%w: unsupported eviction signal %q in minimum reclaims", ErrInvalidThreshold, sig)
		}
		if strings.HasSuffix(val, "%") {
			p, err := parsePercent(sig, val)
			if err != nil {
				return nil, err
			}
			if p <= 0 || p > 1 {
				return nil, invalid(sig, "minimum reclaim %s must be in (0%%, 100%%]", val)
			}
			reclaims[Signal(sig)] = ThresholdValue{Percentage: p}
			continue
		}
		q, err := parseQuantity(sig, val)
		if err != nil {
			return nil, err
		}
		if q.Sign() < 0 {
			return nil, invalid(sig, "minimum reclaim %s must not be negative", val)
		}
		reclaims[Signal(sig)] = ThresholdValue{Quantity: &q}
	}
	out = append(out, hardT...)
	for i := range softT {
		g, ok := graces[softT[i].Signal]
		if !ok {
			return nil, invalid(string(softT[i].Signal), "a soft threshold needs a grace period")
		}
		softT[i].GracePeriod = g
	}
	out = append(out, softT...)
	for i := range out {
		if r, ok := reclaims[out[i].Signal]; ok {
			r := r
			out[i].MinReclaim = &r
		}
	}
	return out, nil
}

func parseStatements(log *zap.Logger, m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, sig := range sortedKeys(m) {
		t, err := parseThreshold(log, sig, m[sig])
		if err != nil {
			return nil, err
		}
		if t != nil {
			out = append(out, *t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return signalRank(out[i].Signal) < signalRank(out[j].Signal) })
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// UpdateContainerFsThresholds derives the containerfs.available and
// containerfs.inodesFree thresholds from the file system that holds
// writable layers, as the kubelet does: with one file system
// (imageFs false, splitContainerFs false) or with images apart and
// writable layers on the node file system (both true), each hard and soft
// nodefs threshold gets a containerfs twin; with images and writable
// layers on their own file system (imageFs true, splitContainerFs false),
// each imagefs threshold does. Containerfs thresholds in ts are replaced
// (and reported in the error, which still comes with the derived set). Any
// other layout leaves ts as it is. ts is not modified.
func UpdateContainerFsThresholds(ts []Threshold, imageFs, splitContainerFs bool) ([]Threshold, error) {
	var from map[Signal]Signal
	switch {
	case imageFs == splitContainerFs:
		from = map[Signal]Signal{SignalNodeFsAvailable: SignalContainerFsAvailable, SignalNodeFsInodesFree: SignalContainerFsInodesFree}
	case imageFs:
		from = map[Signal]Signal{SignalImageFsAvailable: SignalContainerFsAvailable, SignalImageFsInodesFree: SignalContainerFsInodesFree}
	default:
		return slices.Clone(ts), nil
	}
	var errs []error
	out := make([]Threshold, 0, len(ts)+4)
	for _, t := range ts {
		if t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree {
			kind := "hard"
			if !t.IsHard() {
				kind = "soft"
			}
			errs = append(errs, fmt.Errorf("%w: %s %s eviction threshold %s is derived from the file system that holds writable layers, not set", ErrInvalidThreshold, kind, t.Signal, t))
			continue
		}
		out = append(out, t)
	}
	for _, t := range ts {
		to, ok := from[t.Signal]
		if !ok {
			continue
		}
		d := Threshold{Signal: to, Operator: t.Operator, Value: copyValue(t.Value), GracePeriod: t.GracePeriod}
		if t.MinReclaim != nil {
			mr := copyValue(*t.MinReclaim)
			d.MinReclaim = &mr
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}
