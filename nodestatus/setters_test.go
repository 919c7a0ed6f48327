package nodestatus

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func equalLists(t *testing.T, what string, got, want v1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
		return
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s]: got %v, want %v", what, k, got[k], w)
		}
	}
}

func machineOf(m *Machine, err error) MachineFunc {
	return func(context.Context) (*Machine, error) { return m, err }
}

// TestMachineInfo follows the kubelet's setters_test TestMachineInfo cases.
func TestMachineInfo(t *testing.T) {
	base := &Machine{NumCores: 2, MemoryCapacity: 1024, MachineID: "mid", SystemUUID: "uuid", BootID: "boot"}
	cases := []struct {
		name        string
		node        *v1.Node
		machine     *Machine
		machineErr  error
		maxPods     int
		podsPerCore int
		reservation v1.ResourceList
		wantCap     v1.ResourceList
		wantAlloc   v1.ResourceList
		wantErr     bool
	}{
		{
			name: "machine info", machine: base, maxPods: 110,
			wantCap:   v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
			wantAlloc: v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
		},
		{
			name: "pods per core below max", machine: base, maxPods: 110, podsPerCore: 10,
			wantCap:   v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("20")},
			wantAlloc: v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("20")},
		},
		{
			name: "pods per core above max", machine: base, maxPods: 10, podsPerCore: 100,
			wantCap:   v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("10")},
			wantAlloc: v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("10")},
		},
		{
			name: "default max pods", machine: base,
			wantCap:   v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
			wantAlloc: v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
		},
		{
			name: "reservation subtracted", machine: base, maxPods: 110,
			reservation: v1.ResourceList{"cpu": q("500m"), "memory": q("100")},
			wantCap:     v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
			wantAlloc:   v1.ResourceList{"cpu": q("1500m"), "memory": q("924"), "pods": q("110")},
		},
		{
			name: "too large reservation gives zero allocatable", machine: base, maxPods: 110,
			reservation: v1.ResourceList{"cpu": q("40"), "memory": q("40Gi")},
			wantCap:     v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
			wantAlloc:   v1.ResourceList{"cpu": q("0"), "memory": q("0"), "pods": q("110")},
		},
		{
			name: "machine error gives zero cpu and memory, max pods", machineErr: errors.New("boom"), maxPods: 7,
			wantCap:   v1.ResourceList{"cpu": q("0"), "memory": q("0"), "pods": q("7")},
			wantAlloc: v1.ResourceList{"cpu": q("0"), "memory": q("0"), "pods": q("7")},
			wantErr:   true,
		},
		{
			name: "ephemeral storage and hugepages, memory allocatable loses hugepages",
			machine: &Machine{NumCores: 1, MemoryCapacity: 10 << 30, EphemeralStorage: 100 << 30,
				HugePages: map[int64]int64{2 << 20: 512}},
			maxPods:     110,
			reservation: v1.ResourceList{"memory": q("1Gi"), "ephemeral-storage": q("10Gi")},
			wantCap: v1.ResourceList{"cpu": q("1"), "memory": q("10Gi"), "pods": q("110"),
				"ephemeral-storage": q("100Gi"), "hugepages-2Mi": q("1Gi")},
			wantAlloc: v1.ResourceList{"cpu": q("1"), "memory": q("8Gi"), "pods": q("110"),
				"ephemeral-storage": q("90Gi"), "hugepages-2Mi": q("1Gi")},
		},
		{
			name: "stale hugepages and allocatable without capacity are dropped",
			node: &v1.Node{Status: v1.NodeStatus{
				Capacity:    v1.ResourceList{"hugepages-1Gi": q("2Gi")},
				Allocatable: v1.ResourceList{"hugepages-1Gi": q("2Gi"), "example.com/gone": q("1")},
			}},
			machine: base, maxPods: 110,
			wantCap:   v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
			wantAlloc: v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = &v1.Node{}
			}
			set := MachineInfo(MachineInfoConfig{
				Machine: machineOf(tc.machine, tc.machineErr), MaxPods: tc.maxPods, PodsPerCore: tc.podsPerCore,
				Reservation: func() v1.ResourceList { return tc.reservation },
			})
			err := set(t.Context(), node)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMachineInfo) {
				t.Fatalf("unexpected error shape %v", err)
			}
			equalLists(t, "capacity", node.Status.Capacity, tc.wantCap)
			equalLists(t, "allocatable", node.Status.Allocatable, tc.wantAlloc)
			if tc.machine != nil {
				info := node.Status.NodeInfo
				if info.MachineID != tc.machine.MachineID || info.SystemUUID != tc.machine.SystemUUID || info.BootID != tc.machine.BootID {
					t.Errorf("node info = %+v", info)
				}
			}
		})
	}
}

func TestMachineInfoNoSource(t *testing.T) {
	node := &v1.Node{}
	if err := MachineInfo(MachineInfoConfig{})(t.Context(), node); !errors.Is(err, ErrMachineInfo) {
		t.Fatalf("err = %v, want ErrMachineInfo", err)
	}
	// Ready still sees cpu, memory and pods (zero) as present.
	if len(node.Status.Capacity) != 3 {
		t.Fatalf("capacity = %v", node.Status.Capacity)
	}
}

// TestReadyCondition follows the kubelet's TestReadyCondition cases.
func TestReadyCondition(t *testing.T) {
	before := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := before.Add(time.Hour)
	full := v1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "pods": q("110")}
	withReady := func(s v1.ConditionStatus) []v1.NodeCondition {
		return []v1.NodeCondition{{Type: v1.NodeReady, Status: s, LastHeartbeatTime: metav1.NewTime(before), LastTransitionTime: metav1.NewTime(before)}}
	}
	errRuntime := errors.New("container runtime is down")
	errPLEG := errors.New("relist is 4m old")
	cases := []struct {
		name           string
		capacity       v1.ResourceList
		conditions     []v1.NodeCondition
		checks         []func() error
		wantStatus     v1.ConditionStatus
		wantReason     string
		wantMsgParts   []string
		wantTransition time.Time
	}{
		{name: "ready", capacity: full, wantStatus: v1.ConditionTrue, wantReason: ReasonReady, wantTransition: now},
		{name: "missing capacity", capacity: v1.ResourceList{"cpu": q("1")}, wantStatus: v1.ConditionFalse,
			wantReason: ReasonNotReady, wantMsgParts: []string{"missing node capacity for resources: memory, pods"}, wantTransition: now},
		{name: "runtime down", capacity: full, checks: []func() error{func() error { return errRuntime }},
			wantStatus: v1.ConditionFalse, wantReason: ReasonNotReady, wantMsgParts: []string{"container runtime is down"}, wantTransition: now},
		{name: "runtime down, network down, pleg and capacity",
			checks: []func() error{
				RuntimeReadyCheck(func() (bool, bool, error) { return false, false, nil }),
				PLEGCheck(func() (bool, error) { return false, errPLEG }),
				nil,
			},
			wantStatus: v1.ConditionFalse, wantReason: ReasonNotReady,
			wantMsgParts:   []string{"container runtime is not ready", "network is not ready", "PLEG is not healthy: relist is 4m old", "missing node capacity for resources: cpu, memory, pods"},
			wantTransition: now},
		{name: "ready stays ready: transition kept", capacity: full, conditions: withReady(v1.ConditionTrue),
			wantStatus: v1.ConditionTrue, wantReason: ReasonReady, wantTransition: before},
		{name: "ready to not ready: transition now", capacity: full, conditions: withReady(v1.ConditionTrue),
			checks:     []func() error{func() error { return errRuntime }},
			wantStatus: v1.ConditionFalse, wantReason: ReasonNotReady, wantTransition: now},
		{name: "not ready to ready: transition now", capacity: full, conditions: withReady(v1.ConditionFalse),
			wantStatus: v1.ConditionTrue, wantReason: ReasonReady, wantTransition: now},
		{name: "healthy checks pass", capacity: full,
			checks: []func() error{
				RuntimeReadyCheck(func() (bool, bool, error) { return true, true, nil }),
				PLEGCheck(func() (bool, error) { return true, nil }),
			},
			wantStatus: v1.ConditionTrue, wantReason: ReasonReady, wantTransition: now},
	}
	withStorage := v1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "pods": q("110"), "ephemeral-storage": q("10Gi")}
	cases = append(cases, []struct {
		name           string
		capacity       v1.ResourceList
		conditions     []v1.NodeCondition
		checks         []func() error
		wantStatus     v1.ConditionStatus
		wantReason     string
		wantMsgParts   []string
		wantTransition time.Time
	}{
		{name: "storage required: missing", capacity: full, wantStatus: v1.ConditionFalse, wantReason: ReasonNotReady,
			wantMsgParts: []string{"missing node capacity for resources: ephemeral-storage"}, wantTransition: now},
		{name: "storage required: present", capacity: withStorage, wantStatus: v1.ConditionTrue, wantReason: ReasonReady, wantTransition: now},
		{name: "storage required: all missing", wantStatus: v1.ConditionFalse, wantReason: ReasonNotReady,
			wantMsgParts: []string{"missing node capacity for resources: cpu, memory, pods, ephemeral-storage"}, wantTransition: now},
	}...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			node := &v1.Node{Status: v1.NodeStatus{Capacity: tc.capacity, Conditions: tc.conditions}}
			setter := ReadyCondition(clk, tc.checks...)
			if strings.HasPrefix(tc.name, "storage required") {
				setter = ReadyConditionRequiring(clk, []v1.ResourceName{v1.ResourceEphemeralStorage}, tc.checks...)
			}
			if err := setter(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			if len(node.Status.Conditions) != 1 {
				t.Fatalf("conditions = %+v", node.Status.Conditions)
			}
			c := node.Status.Conditions[0]
			if c.Type != v1.NodeReady || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Errorf("condition = %+v", c)
			}
			for _, part := range tc.wantMsgParts {
				if !strings.Contains(c.Message, part) {
					t.Errorf("message %q lacks %q", c.Message, part)
				}
			}
			if !c.LastHeartbeatTime.Time.Equal(now) {
				t.Errorf("heartbeat = %v, want %v", c.LastHeartbeatTime, now)
			}
			if !c.LastTransitionTime.Time.Equal(tc.wantTransition) {
				t.Errorf("transition = %v, want %v", c.LastTransitionTime, tc.wantTransition)
			}
		})
	}
}

type pressure struct{ mem, disk, pid bool }

func (p pressure) IsUnderMemoryPressure() bool { return p.mem }
func (p pressure) IsUnderDiskPressure() bool   { return p.disk }
func (p pressure) IsUnderPIDPressure() bool    { return p.pid }

// TestPressureConditions follows the kubelet's TestMemoryPressureCondition
// (and its disk and PID twins): new condition, flips, heartbeat-only calls.
func TestPressureConditions(t *testing.T) {
	kinds := []struct {
		typ                  v1.NodeConditionType
		setter               func(*clocktesting.FakeClock, kubetypes.PressureSource) Setter
		on                   pressure
		trueReason, okReason string
	}{
		{v1.NodeMemoryPressure, func(c *clocktesting.FakeClock, p kubetypes.PressureSource) Setter {
			return MemoryPressureCondition(c, p)
		},
			pressure{mem: true}, "KubeletHasInsufficientMemory", "KubeletHasSufficientMemory"},
		{v1.NodeDiskPressure, func(c *clocktesting.FakeClock, p kubetypes.PressureSource) Setter { return DiskPressureCondition(c, p) },
			pressure{disk: true}, "KubeletHasDiskPressure", "KubeletHasNoDiskPressure"},
		{v1.NodePIDPressure, func(c *clocktesting.FakeClock, p kubetypes.PressureSource) Setter { return PIDPressureCondition(c, p) },
			pressure{pid: true}, "KubeletHasInsufficientPID", "KubeletHasSufficientPID"},
	}
	for _, k := range kinds {
		t.Run(string(k.typ), func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(t0)
			var src kubetypes.PressureSource // nil: no pressure
			cur := &src
			var last *v1.NodeCondition
			set := func() v1.NodeCondition {
				t.Helper()
				node := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: "Other"}}}}
				if last != nil {
					node.Status.Conditions = append(node.Status.Conditions, *last)
				}
				if err := k.setter(clk, *cur)(t.Context(), node); err != nil {
					t.Fatal(err)
				}
				if len(node.Status.Conditions) != 2 || node.Status.Conditions[0].Type != "Other" {
					t.Fatalf("conditions = %+v", node.Status.Conditions)
				}
				c := node.Status.Conditions[1]
				last = &c
				return c
			}
			check := func(c v1.NodeCondition, status v1.ConditionStatus, reason string, transition time.Time) {
				t.Helper()
				if c.Type != k.typ || c.Status != status || c.Reason != reason || c.Message == "" {
					t.Errorf("condition = %+v", c)
				}
				if !c.LastHeartbeatTime.Time.Equal(clk.Now()) {
					t.Errorf("heartbeat = %v, want %v", c.LastHeartbeatTime, clk.Now())
				}
				if !c.LastTransitionTime.Time.Equal(transition) {
					t.Errorf("transition = %v, want %v", c.LastTransitionTime, transition)
				}
			}
			check(set(), v1.ConditionFalse, k.okReason, t0) // new, no pressure (nil source)
			clk.Step(time.Minute)
			check(set(), v1.ConditionFalse, k.okReason, t0) // heartbeat only
			clk.Step(time.Minute)
			src = k.on
			check(set(), v1.ConditionTrue, k.trueReason, t0.Add(2*time.Minute)) // flip
			clk.Step(time.Minute)
			check(set(), v1.ConditionTrue, k.trueReason, t0.Add(2*time.Minute))
			clk.Step(time.Minute)
			src = pressure{}
			check(set(), v1.ConditionFalse, k.okReason, t0.Add(4*time.Minute))
			// A new condition under pressure starts True right away.
			last = nil
			src = k.on
			check(set(), v1.ConditionTrue, k.trueReason, clk.Now())
		})
	}
}

func TestReportDelay(t *testing.T) {
	p := 5 * time.Minute
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		d := ReportDelay(p, r)
		if d < -p/2 || d >= p/2 {
			t.Errorf("ReportDelay(%v) = %v out of [-p/2, p/2)", r, d)
		}
	}
	if d := ReportDelay(p, 0); d != -p/2 {
		t.Errorf("ReportDelay(0) = %v, want %v", d, -p/2)
	}
	if d := ReportDelay(p, 0.75); d != p/4 {
		t.Errorf("ReportDelay(0.75) = %v, want %v", d, p/4)
	}
	for _, bad := range []float64{-1, 1, 2} {
		if d := ReportDelay(p, bad); d != 0 {
			t.Errorf("ReportDelay(%v) = %v, want 0", bad, d)
		}
	}
}

func TestNodeAddress(t *testing.T) {
	v4 := net.ParseIP("10.0.0.5")
	v4b := net.ParseIP("10.0.0.6")
	v6 := net.ParseIP("fd00::5")
	hostIPs := func(ips ...string) func() ([]net.IP, error) {
		return func() ([]net.IP, error) {
			var out []net.IP
			for _, s := range ips {
				out = append(out, net.ParseIP(s))
			}
			return out, nil
		}
	}
	cases := []struct {
		name    string
		cfg     AddressConfig
		want    []v1.NodeAddress
		wantErr error
	}{
		{"node IP", AddressConfig{NodeIPs: []net.IP{v4}, Hostname: "h"},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "h"}}, nil},
		{"dual stack", AddressConfig{NodeIPs: []net.IP{v4, v6}, Hostname: "h"},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "fd00::5"}, {Type: v1.NodeHostName, Address: "h"}}, nil},
		{"hostname is an IP", AddressConfig{Hostname: "10.1.2.3"},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}, {Type: v1.NodeHostName, Address: "10.1.2.3"}}, nil},
		{"lookup prefers IPv4, skips loopback", AddressConfig{
			LookupIP: func(ctx context.Context, host string) ([]net.IP, error) {
				return []net.IP{net.ParseIP("127.0.1.1"), v6, v4b}, nil
			}},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.6"}, {Type: v1.NodeHostName, Address: "n1"}}, nil},
		{"'::' prefers IPv6 from interfaces", AddressConfig{NodeIPs: []net.IP{net.IPv6unspecified}, HostIPs: hostIPs("127.0.0.1", "10.0.0.5", "fe80::1", "fd00::5")},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "fd00::5"}, {Type: v1.NodeHostName, Address: "n1"}}, nil},
		{"interfaces", AddressConfig{HostIPs: hostIPs("127.0.0.1", "fd00::5", "10.0.0.6")},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.6"}, {Type: v1.NodeHostName, Address: "n1"}}, nil},
		{"nothing usable", AddressConfig{HostIPs: hostIPs("127.0.0.1", "fe80::1")}, nil, ErrNoAddress},
		{"loopback node IP refused", AddressConfig{NodeIPs: []net.IP{net.ParseIP("127.0.0.1")}}, nil, ErrNoAddress},
		{"loopback node IP allowed", AddressConfig{NodeIPs: []net.IP{net.ParseIP("127.0.0.1")}, AllowLoopback: true},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, {Type: v1.NodeHostName, Address: "n1"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			err := NodeAddress(tc.cfg)(t.Context(), node)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if len(node.Status.Addresses) != len(tc.want) {
				t.Fatalf("addresses = %v, want %v", node.Status.Addresses, tc.want)
			}
			for i := range tc.want {
				if node.Status.Addresses[i] != tc.want[i] {
					t.Errorf("addresses = %v, want %v", node.Status.Addresses, tc.want)
				}
			}
			// StaticAddresses is the same choice without the name lookup.
			if tc.cfg.LookupIP == nil {
				static, err := StaticAddresses(tc.cfg, "n1")
				if err != nil || !slices.Equal(static, tc.want) {
					t.Errorf("StaticAddresses = %v, %v, want %v", static, err, tc.want)
				}
			}
		})
	}
}

func TestStaticAddressesDoesNoLookup(t *testing.T) {
	cfg := AddressConfig{
		LookupIP: func(context.Context, string) ([]net.IP, error) {
			t.Error("StaticAddresses looked the name up")
			return nil, errors.New("no lookup")
		},
		HostIPs: func() ([]net.IP, error) { return []net.IP{net.ParseIP("10.0.0.9")}, nil },
	}
	got, err := StaticAddresses(cfg, "n1")
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}, {Type: v1.NodeHostName, Address: "n1"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("StaticAddresses = %v, %v, want %v", got, err, want)
	}
	if _, err := StaticAddresses(AddressConfig{NodeIPs: []net.IP{net.ParseIP("127.0.0.1")}}, "n1"); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("loopback node IP: err = %v, want ErrNoAddress", err)
	}
}

// TestHostIPs: the pods' host IPs from the node's addresses, as the
// kubelet picks them: InternalIPs before ExternalIPs, the first address,
// then the first of the other family; hostnames and garbage skipped.
func TestHostIPs(t *testing.T) {
	in := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
	ex := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }
	host := v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"}
	for _, tc := range []struct {
		name  string
		addrs []v1.NodeAddress
		want  []string
	}{
		{"none", nil, nil},
		{"hostname only", []v1.NodeAddress{host}, nil},
		{"one internal", []v1.NodeAddress{host, in("10.0.0.5")}, []string{"10.0.0.5"}},
		{"two internal of one family", []v1.NodeAddress{in("10.0.0.5"), in("10.0.0.6")}, []string{"10.0.0.5"}},
		{"dual stack", []v1.NodeAddress{in("10.0.0.5"), in("10.0.0.6"), in("fd00::5")}, []string{"10.0.0.5", "fd00::5"}},
		{"IPv6 primary", []v1.NodeAddress{in("fd00::5"), in("10.0.0.5")}, []string{"fd00::5", "10.0.0.5"}},
		{"internal before external", []v1.NodeAddress{ex("203.0.113.1"), in("10.0.0.5")}, []string{"10.0.0.5"}},
		{"external of the other family", []v1.NodeAddress{ex("2001:db8::1"), in("10.0.0.5")}, []string{"10.0.0.5", "2001:db8::1"}},
		{"external only", []v1.NodeAddress{ex("203.0.113.1")}, []string{"203.0.113.1"}},
		{"garbage skipped, canonical form", []v1.NodeAddress{in("not-an-ip"), in("FD00:0::5"), in("::ffff:10.0.0.5")}, []string{"fd00::5", "10.0.0.5"}},
	} {
		if got := HostIPs(tc.addrs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: HostIPs(%v) = %q, want %q", tc.name, tc.addrs, got, tc.want)
		}
	}
}

type fakeCRI struct {
	name, version string
	err           error
	images        []*runtimeapi.Image
}

func (f *fakeCRI) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.VersionResponse{RuntimeName: f.name, RuntimeVersion: f.version}, nil
}

func (f *fakeCRI) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, f.err
}

func TestVersionInfo(t *testing.T) {
	rt := &fakeCRI{name: "containerd", version: "1.6.20"}
	m := &Machine{KernelVersion: "6.18.0", OSImage: "Debian GNU/Linux 12 (bookworm)"}
	set := VersionInfo(rt, machineOf(m, nil), "")
	//lint:ignore SA1019 the test checks the deprecated field is cleared
	node := &v1.Node{Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeProxyVersion: "v1.20.0"}}}
	if err := set(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	if info.ContainerRuntimeVersion != "containerd://1.6.20" || info.KernelVersion != "6.18.0" ||
		//lint:ignore SA1019 the test checks the deprecated field is cleared
		info.OSImage != m.OSImage || info.KubeletVersion != DefaultAgentVersion || info.KubeProxyVersion != "" {
		t.Errorf("node info = %+v", info)
	}
	rt.err = errors.New("down")
	if err := set(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; got != "containerd://Unknown" {
		t.Errorf("runtime down: %q, want containerd://Unknown", got)
	}
	if err := VersionInfo(nil, machineOf(nil, ErrMachineInfo), "v9")(t.Context(), node); !errors.Is(err, ErrMachineInfo) {
		t.Errorf("machine error: %v", err)
	}
}

func TestImages(t *testing.T) {
	var imgs []*runtimeapi.Image
	for i := range 60 {
		imgs = append(imgs, &runtimeapi.Image{
			RepoTags:    []string{"t1", "t2", "t3", "t4"},
			RepoDigests: []string{"d1", "d2"},
			Size:        uint64(i * 10),
		})
	}
	rt := &fakeCRI{images: imgs}
	node := &v1.Node{}
	if err := Images(rt, 0)(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	if len(node.Status.Images) != DefaultMaxImages {
		t.Fatalf("images = %d, want %d", len(node.Status.Images), DefaultMaxImages)
	}
	first := node.Status.Images[0]
	if first.SizeBytes != 590 || strings.Join(first.Names, ",") != "d1,d2,t1,t2,t3" {
		t.Errorf("first image = %+v", first)
	}
	if last := node.Status.Images[49]; last.SizeBytes != 100 {
		t.Errorf("last image = %+v", last)
	}
	if err := Images(rt, -1)(t.Context(), node); err != nil || len(node.Status.Images) != 60 {
		t.Errorf("-1: %d images, err %v", len(node.Status.Images), err)
	}
	rt.err = errors.New("down")
	if err := Images(rt, 3)(t.Context(), node); err == nil || node.Status.Images != nil {
		t.Errorf("error: images %v, err %v", node.Status.Images, err)
	}
}

func TestVolumesInUse(t *testing.T) {
	synced := false
	vols := []v1.UniqueVolumeName{"kubernetes.io/csi/a"}
	set := VolumesInUse(func() bool { return synced }, func() []v1.UniqueVolumeName { return vols })
	node := &v1.Node{Status: v1.NodeStatus{VolumesInUse: []v1.UniqueVolumeName{"old"}}}
	_ = set(t.Context(), node)
	if len(node.Status.VolumesInUse) != 1 || node.Status.VolumesInUse[0] != "old" {
		t.Errorf("before sync: %v", node.Status.VolumesInUse)
	}
	synced = true
	_ = set(t.Context(), node)
	if len(node.Status.VolumesInUse) != 1 || node.Status.VolumesInUse[0] != vols[0] {
		t.Errorf("after sync: %v", node.Status.VolumesInUse)
	}
}

func writeFile(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMachineReader(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "/proc/meminfo", "MemTotal:       24576000 kB\nMemFree:  1 kB\n")
	writeFile(t, root, "/sys/devices/system/cpu/online", "0-1,4\n")
	writeFile(t, root, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "3\n")
	writeFile(t, root, "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
	writeFile(t, root, "/etc/machine-id", "abc123\n")
	writeFile(t, root, "/proc/sys/kernel/random/boot_id", "boot-1\n")
	writeFile(t, root, "/proc/sys/kernel/osrelease", "6.18.0-test\n")
	writeFile(t, root, "/etc/os-release", "NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
	r := MachineReader{Root: root, Statfs: func(path string, st *unix.Statfs_t) error {
		if path != root {
			t.Errorf("statfs of %q, want %q", path, root)
		}
		st.Bsize, st.Blocks = 4096, 1000
		return nil
	}}
	m, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Machine{NumCores: 3, MemoryCapacity: 24576000 * 1024, EphemeralStorage: 4096000,
		MachineID: "abc123", BootID: "boot-1", KernelVersion: "6.18.0-test", OSImage: "Debian GNU/Linux 12 (bookworm)"}
	if m.NumCores != want.NumCores || m.MemoryCapacity != want.MemoryCapacity || m.EphemeralStorage != want.EphemeralStorage ||
		m.MachineID != want.MachineID || m.BootID != want.BootID || m.KernelVersion != want.KernelVersion || m.OSImage != want.OSImage || m.SystemUUID != "" {
		t.Errorf("machine = %+v, want %+v", m, want)
	}
	if len(m.HugePages) != 2 || m.HugePages[2<<20] != 3 || m.HugePages[1<<30] != 0 {
		t.Errorf("hugepages = %v", m.HugePages)
	}

	// Garbage CPU list falls back to NumCPU; missing meminfo is an error.
	writeFile(t, root, "/sys/devices/system/cpu/online", "0-99999999\n")
	r.NumCPU = func() int { return 7 }
	if m, err := r.Read(t.Context()); err != nil || m.NumCores != 7 {
		t.Errorf("fallback cores: %v, %v", m, err)
	}
	writeFile(t, root, "/proc/meminfo", "MemTotal: lots kB\n")
	if _, err := r.Read(t.Context()); !errors.Is(err, ErrMachineInfo) {
		t.Errorf("bad meminfo: %v", err)
	}
	if _, err := (MachineReader{Root: t.TempDir()}).Read(t.Context()); !errors.Is(err, ErrMachineInfo) {
		t.Errorf("missing meminfo: %v", err)
	}
}

// The host's own machine can be read (on Linux CI machines).
func TestMachineReaderHost(t *testing.T) {
	m, err := MachineReader{}.Read(t.Context())
	if err != nil {
		t.Skipf("host machine not readable: %v", err)
	}
	if m.NumCores <= 0 || m.MemoryCapacity <= 0 {
		t.Errorf("machine = %+v", m)
	}
}

func TestCountCPUList(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-3,8,10-11": 7} {
		if n, ok := countCPUList(s); !ok || n != want {
			t.Errorf("%q = %d, %v; want %d", s, n, ok, want)
		}
	}
	for _, bad := range []string{"", "x", "3-1", "-1", "0-20000000", "1,,2"} {
		if _, ok := countCPUList(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

type fakeDevices struct{ capacity, allocatable v1.ResourceList }

func (f *fakeDevices) DeviceCapacity() (v1.ResourceList, v1.ResourceList) {
	return f.capacity, f.allocatable
}

// TestMachineInfoDevices: device plugin resources join capacity, and
// their allocatable is the healthy count, not capacity minus reservation;
// a resource reported as 0 stays in both as 0.
func TestMachineInfoDevices(t *testing.T) {
	base := &Machine{NumCores: 2, MemoryCapacity: 1024}
	dev := &fakeDevices{
		capacity:    v1.ResourceList{"example.com/widget": q("3")},
		allocatable: v1.ResourceList{"example.com/widget": q("2")},
	}
	setter := MachineInfo(MachineInfoConfig{Machine: machineOf(base, nil), MaxPods: 110, Devices: dev})
	node := &v1.Node{}
	if err := setter(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	equalLists(t, "capacity", node.Status.Capacity, v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110"), "example.com/widget": q("3")})
	equalLists(t, "allocatable", node.Status.Allocatable, v1.ResourceList{"cpu": q("2"), "memory": q("1Ki"), "pods": q("110"), "example.com/widget": q("2")})
	dev.capacity = v1.ResourceList{"example.com/widget": q("0")}
	dev.allocatable = v1.ResourceList{"example.com/widget": q("0")}
	if err := setter(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if c, a := node.Status.Capacity["example.com/widget"], node.Status.Allocatable["example.com/widget"]; c.Value() != 0 || a.Value() != 0 {
		t.Fatalf("gone resource: capacity %v allocatable %v, want 0 and 0", c, a)
	}
}
