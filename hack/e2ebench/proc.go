package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/procmem"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU time (user + system) a process used so far.
func procCPU(pid int) (time.Duration, error) {
	self, _, err := procCPUs(pid)
	return self, err
}

// procCPUs returns the CPU time (user + system) a process used so far, and
// that of its children it waited for (cutime + cstime).
func procCPUs(pid int) (self, children time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseProcStatAll(string(data))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line.
func parseProcStat(line string) (time.Duration, error) {
	self, _, err := parseProcStatAll(line)
	return self, err
}

// parseProcStatAll reads utime+stime (fields 14 and 15) and
// cutime+cstime (16 and 17) of a /proc/<pid>/stat line. The command name
// (field 2) may hold spaces and parentheses: the fields are counted from
// its last ')'.
func parseProcStatAll(line string) (self, children time.Duration, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc stat: no ')' after the command name")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12];
	// cutime f[13], cstime f[14].
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 15", len(f))
	}
	var ticks [4]int64
	for j, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, fmt.Errorf("/proc stat: bad tick count %q", s)
		}
		ticks[j] = v
	}
	tick := func(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }
	return tick(ticks[0] + ticks[1]), tick(ticks[2] + ticks[3]), nil
}

// procHWM returns a process's peak resident set (VmHWM) in bytes.
func procHWM(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseHWM(string(data))
}

func parseHWM(status string) (int64, error) {
	st, err := procmem.Parse(strings.NewReader(status))
	if err != nil {
		return 0, fmt.Errorf("/proc status: %w", err)
	}
	if st.HWM == 0 {
		return 0, errors.New("/proc status: no VmHWM line")
	}
	return int64(st.HWM), nil
}

// percentile returns the p-quantile (0..1) of ds by the nearest-rank
// method: the smallest value with at least p of the samples at or below it.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p*float64(len(s)) + 0.999999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// median of ds (the upper one of an even count); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianInt(vs []int64) int64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]int64(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// parseCounts parses "30,100".
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n > 1000 {
			return nil, fmt.Errorf("pod count %q: want an integer in 1..1000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseDurations parses "1s,100ms". "evented" is 0: the exit case then runs
// the agent with the evented PLEG (standalone --evented-pleg) at its default
// evented relist period instead of relisting.
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f == "evented" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("period %q: want a positive duration or \"evented\"", f)
		}
		out = append(out, d)
	}
	return out, nil
}
