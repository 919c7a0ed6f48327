package procmem_test

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nodekit/nodekit/internal/procmem"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       procmem.Status
	}{
		{"all fields", "Name:\tagent\nVmHWM:\t  4096 kB\nVmRSS:\t  2048 kB\nRssAnon:\t  1536 kB\nRssFile:\t   512 kB\nThreads:\t7\n",
			procmem.Status{RSS: 2 << 20, HWM: 4 << 20, Anon: 1536 << 10, File: 512 << 10, Threads: 7}},
		{"a kernel before 4.5: no RssAnon or RssFile", "VmHWM:\t 9999 kB\nVmRSS:\t 100 kB\nThreads:\t1\n",
			procmem.Status{RSS: 100 << 10, HWM: 9999 << 10, Threads: 1}},
		{"other lines and fields skipped", "Name:\tVmRSS: 1 kB\nVmRSS:\t3 kB\nRssShmem:\tx\nno colon\n\nSigQ:\t0/1\n",
			procmem.Status{RSS: 3 << 10}},
		{"zero RSS", "VmRSS:\t0 kB\n", procmem.Status{}},
		{"no final newline", "Threads:\t2\nVmRSS:\t1 kB", procmem.Status{RSS: 1 << 10, Threads: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := procmem.Parse(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       error
		mention    string
	}{
		{"no VmRSS", "Name:\tkthreadd\nThreads:\t1\n", procmem.ErrNoRSS, ""},
		{"empty", "", procmem.ErrNoRSS, ""},
		{"not a number", "VmRSS:\tlots kB\n", procmem.ErrBadField, "VmRSS"},
		{"negative", "RssAnon:\t-1 kB\nVmRSS:\t1 kB\n", procmem.ErrBadField, "RssAnon"},
		{"no unit", "VmRSS:\t1\n", procmem.ErrBadField, "VmRSS"},
		{"other unit", "RssFile:\t1 MB\nVmRSS:\t1 kB\n", procmem.ErrBadField, "RssFile"},
		{"bad peak", "VmHWM:\tx kB\nVmRSS:\t1 kB\n", procmem.ErrBadField, "VmHWM"},
		{"no value", "VmRSS:\n", procmem.ErrBadField, "VmRSS"},
		{"threads with a unit", "VmRSS:\t1 kB\nThreads:\t3 kB\n", procmem.ErrBadField, "Threads"},
		{"overflows in bytes", "VmRSS:\t18014398509481984 kB\n", procmem.ErrBadField, "18014398509481984"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := procmem.Parse(strings.NewReader(tc.text))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %+v, %v; want %v", st, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name %q", err, tc.mention)
			}
		})
	}
}

func TestParseLargestValue(t *testing.T) {
	st, err := procmem.Parse(strings.NewReader("VmRSS:\t18014398509481983 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS != (1<<54-1)<<10 {
		t.Errorf("RSS %d", st.RSS)
	}
}

func TestParseReaderError(t *testing.T) {
	boom := errors.New("boom")
	if _, err := procmem.Parse(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

func TestReadSelfAndPid(t *testing.T) {
	self, err := procmem.ReadSelf()
	if err != nil {
		t.Fatal(err)
	}
	byPid, err := procmem.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []procmem.Status{self, byPid} {
		// A running Go test has a resident set, mostly its binary and heap,
		// and more than one thread.
		if st.RSS == 0 || st.Anon+st.File == 0 || st.Anon+st.File > st.RSS+(1<<20) || st.Threads < 2 {
			t.Errorf("implausible status of this process: %+v", st)
		}
	}
}

func TestReadBadPid(t *testing.T) {
	if _, err := procmem.Read(0); err == nil || !strings.Contains(err.Error(), "pid 0") {
		t.Errorf("Read(0): %v, want an error naming pid 0", err)
	}
	// Above the kernel's largest pid_max (2^22): no such process.
	if _, err := procmem.Read(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(1<<30): %v, want not exist", err)
	}
}
