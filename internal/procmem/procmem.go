package procmem

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Status is a process's memory as /proc/<pid>/status reports it. The
// memory fields are in bytes; a field the kernel does not report (RssAnon
// and RssFile before Linux 4.5) is 0.
type Status struct {
	RSS     uint64 // VmRSS: the resident set
	HWM     uint64 // VmHWM: the largest resident set so far
	Anon    uint64 // RssAnon: its anonymous pages
	File    uint64 // RssFile: its file-backed pages
	Threads uint64 // Threads
}

// Read reads the status of the process pid.
func Read(pid int) (Status, error) {
	if pid <= 0 {
		return Status{}, fmt.Errorf("procmem: pid %d is not a process id", pid)
	}
	return readFile(fmt.Sprintf("/proc/%d/status", pid))
}

// ReadSelf reads the status of the calling process.
func ReadSelf() (Status, error) { return readFile("/proc/self/status") }

func readFile(path string) (Status, error) {
	f, err := os.Open(path)
	if err != nil {
		return Status{}, err
	}
	defer f.Close()
	st, err := Parse(f)
	if err != nil {
		return Status{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Parse reads status text in the /proc/<pid>/status format: "Name:
// value" lines, the memory ones as "VmRSS:     1234 kB". Lines it does
// not read are skipped.
func Parse(r io.Reader) (Status, error) {
	var st Status
	var rss bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		kb := true
		switch name {
		case "VmRSS":
			dst, rss = &st.RSS, true
		case "VmHWM":
			dst = &st.HWM
		case "RssAnon":
			dst = &st.Anon
		case "RssFile":
			dst = &st.File
		case "Threads":
			dst, kb = &st.Threads, false
		default:
			continue
		}
		v, ok := number(value, kb)
		if !ok {
			return Status{}, fmt.Errorf("%w: %s: %q", ErrBadField, name, strings.TrimSpace(value))
		}
		*dst = v
	}
	if err := sc.Err(); err != nil {
		return Status{}, err
	}
	if !rss {
		return Status{}, ErrNoRSS
	}
	return st, nil
}

// number is a field's value: "12" or, when kb, "1234 kB" in bytes.
func number(value string, kb bool) (uint64, bool) {
	f := strings.Fields(value)
	if kb && (len(f) != 2 || f[1] != "kB") || !kb && len(f) != 1 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	if !kb {
		return v, true
	}
	if v >= 1<<54 { // would overflow in bytes
		return 0, false
	}
	return v << 10, true
}
