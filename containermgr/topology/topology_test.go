package topology

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseCPUSet(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{in: "", want: ""},
		{in: "\n", want: ""},
		{in: "0", want: "0"},
		{in: "0-3", want: "0-3"},
		{in: "0-1,4,6-7\n", want: "0-1,4,6-7"},
		{in: "3,1,2", want: "1-3"},
		{in: "1-1", want: "1"},
		{in: "0-2,1-3", want: "0-3"},
		{in: "8191", want: "8191"},
		{in: "8192", err: true},
		{in: "0-20000000", err: true},
		{in: "99999999999999999999999", err: true},
		{in: "3-1", err: true},
		{in: "-1", err: true},
		{in: "1,", err: true},
		{in: ",1", err: true},
		{in: "1,,2", err: true},
		{in: "1-", err: true},
		{in: "1 - 2", err: true},
		{in: " 1", err: true},
		{in: "a", err: true},
		{in: "1-2-3", err: true},
		{in: "+1", err: true},
		{in: strings.Repeat("1,", MaxCPUSetLen), err: true},
	} {
		got, err := ParseCPUSet(tc.in)
		if tc.err {
			if !errors.Is(err, ErrInvalidCPUSet) {
				t.Errorf("ParseCPUSet(%.20q) = %v, %v; want ErrInvalidCPUSet", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseCPUSet(%q) = %q, %v; want %q", tc.in, got.String(), err, tc.want)
		}
	}
}

func TestSynthetic(t *testing.T) {
	topo, err := Synthetic(2, 4, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() != 16 || topo.NumCores() != 8 || topo.NumSockets() != 2 || topo.NumNUMANodes() != 4 {
		t.Fatalf("got %s", topo)
	}
	if topo.CPUsPerCore() != 2 || topo.CPUsPerSocket() != 8 {
		t.Errorf("per core %d, per socket %d", topo.CPUsPerCore(), topo.CPUsPerSocket())
	}
	// Linux-style numbering: the siblings of CPU 0 and 5 are 8 and 13.
	if got := topo.CPUsInCore(0); len(got) != 2 || got[0] != 0 || got[1] != 8 {
		t.Errorf("core 0 = %v", got)
	}
	if c, _ := topo.CPU(13); c.Core != 5 || c.Socket != 1 || c.NUMANode != 2 {
		t.Errorf("cpu 13 = %+v", c)
	}
	if got := topo.CPUsInNUMANode(3); len(got) != 4 || got[0] != 6 || got[3] != 15 {
		t.Errorf("numa 3 = %v", got)
	}
	if topo.All().String() != "0-15" {
		t.Errorf("all = %s", topo.All())
	}
	for _, bad := range [][4]int{{0, 1, 1, 1}, {1, 3, 1, 2}, {1, 1 << 20, 1, 1}, {1 << 16, 1 << 16, 1, 1}} {
		if _, err := Synthetic(bad[0], bad[1], bad[2], bad[3]); !errors.Is(err, ErrInvalidTopology) {
			t.Errorf("Synthetic%v: %v", bad, err)
		}
	}
}

func TestNewRejectsInconsistentCPUs(t *testing.T) {
	for name, cpus := range map[string][]CPU{
		"empty":        nil,
		"duplicate":    {{ID: 0}, {ID: 0}},
		"negative":     {{ID: -1}},
		"too large":    {{ID: MaxCPUID + 1}},
		"core spans":   {{ID: 0, Core: 0, Socket: 0}, {ID: 1, Core: 0, Socket: 1}},
		"negative ids": {{ID: 0, NUMANode: -1}},
	} {
		if _, err := New(cpus); !errors.Is(err, ErrInvalidTopology) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// fakeSysfs lays out a sysfs tree: cpus maps cpu id -> {socket, core_id};
// nodes maps node id -> cpulist.
func fakeSysfs(t *testing.T, online string, cpus map[int][2]string, nodes map[int]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, v string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/devices/system/cpu/online", online)
	for id, v := range cpus {
		dir := filepath.Join("sys/devices/system/cpu", "cpu"+itoa(id), "topology")
		write(filepath.Join(dir, "physical_package_id"), v[0])
		write(filepath.Join(dir, "core_id"), v[1])
	}
	for id, l := range nodes {
		write(filepath.Join("sys/devices/system/node", "node"+itoa(id), "cpulist"), l)
	}
	return root
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDiscover(t *testing.T) {
	// 2 sockets × 2 cores × 2 threads; core_id repeats per socket; cpu 7
	// is offline; one NUMA node per socket.
	cpus := map[int][2]string{
		0: {"0", "0"}, 1: {"0", "1"}, 2: {"1", "0"}, 3: {"1", "1"},
		4: {"0", "0"}, 5: {"0", "1"}, 6: {"1", "0"}, 7: {"1", "1"},
	}
	root := fakeSysfs(t, "0-6", cpus, map[int]string{0: "0-1,4-5", 1: "2-3,6-7"})
	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() != 7 || topo.NumCores() != 4 || topo.NumSockets() != 2 || topo.NumNUMANodes() != 2 {
		t.Fatalf("got %s", topo)
	}
	if c, _ := topo.CPU(6); c.Core != 2 || c.Socket != 1 || c.NUMANode != 1 {
		t.Errorf("cpu 6 = %+v", c)
	}
	if c, _ := topo.CPU(5); c.Core != 1 || c.NUMANode != 0 {
		t.Errorf("cpu 5 = %+v", c)
	}
	if got := topo.CPUsInCore(3); len(got) != 1 || got[0] != 3 {
		t.Errorf("core 3 (sibling offline) = %v", got)
	}
	if _, ok := topo.CPU(7); ok {
		t.Error("offline cpu 7 is in the topology")
	}
}

func TestDiscoverWithoutNUMAAndBadFiles(t *testing.T) {
	root := fakeSysfs(t, "0-1", map[int][2]string{0: {"-1", "0"}, 1: {"-1", "0"}}, nil)
	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumNUMANodes() != 1 || topo.NumSockets() != 1 || topo.NumCores() != 1 || topo.CPUsPerCore() != 2 {
		t.Errorf("got %s", topo)
	}
	for name, root := range map[string]string{
		"bad online":  fakeSysfs(t, "0-20000000", nil, nil),
		"missing cpu": fakeSysfs(t, "0-1", map[int][2]string{0: {"0", "0"}}, nil),
		"bad core id": fakeSysfs(t, "0", map[int][2]string{0: {"0", "x"}}, nil),
		"bad cpulist": fakeSysfs(t, "0", map[int][2]string{0: {"0", "0"}}, map[int]string{0: "0-"}),
		"no sysfs":    t.TempDir(),
	} {
		if _, err := Discover(root); !errors.Is(err, ErrInvalidTopology) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDiscoverRealMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skip("no sysfs")
	}
	topo, err := Discover("")
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() < 1 || topo.NumCores() < 1 || topo.NumNUMANodes() < 1 {
		t.Errorf("got %s", topo)
	}
}

func FuzzParseCPUSet(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,8", "0-20000000", "1,,2", "8191", "3-1", "0-8191"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUSet(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidCPUSet) {
				t.Fatalf("error %v does not wrap ErrInvalidCPUSet", err)
			}
			return
		}
		for _, c := range set.UnsortedList() {
			if c < 0 || c > MaxCPUID {
				t.Fatalf("cpu %d out of bounds from %q", c, s)
			}
		}
		// The canonical form parses back to the same set.
		again, err := ParseCPUSet(set.String())
		if err != nil || !again.Equals(set) {
			t.Fatalf("round trip of %q: %v, %v", set.String(), again, err)
		}
	})
}

func TestHintString(t *testing.T) {
	for _, tc := range []struct {
		h    Hint
		want string
	}{
		{Hint{NUMANodes: []int{0}, Preferred: true}, "{0 preferred}"},
		{Hint{NUMANodes: []int{0, 1}}, "{0,1}"},
	} {
		if got := tc.h.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.h, got, tc.want)
		}
	}
}
