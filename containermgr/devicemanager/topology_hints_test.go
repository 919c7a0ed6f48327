package devicemanager

import (
	"fmt"
	"slices"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// onNUMA gives device i the NUMA node nodes[i].
func onNUMA(nodes ...int64) []*pluginapi.Device {
	devs := devices(len(nodes), pluginapi.Healthy)
	for i, n := range nodes {
		devs[i].Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: n}}}
	}
	return devs
}

func hintString(hs []topology.Hint) string {
	if hs == nil {
		return "nil"
	}
	return fmt.Sprint(hs)
}

func TestTopologyHints(t *testing.T) {
	m, p, _ := registered(t, 4, nil)
	p.setDevices(onNUMA(0, 0, 1, 1))
	waitFor(t, m.Manager, "NUMA devices", func() bool {
		return hintString(m.TopologyHints(podWith("x", 1), &podWith("x", 1).Spec.Containers[0])[widget]) != "nil"
	})
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{2, "[{0 preferred} {1 preferred} {0,1}]"},
		{3, "[{0,1 preferred}]"},
		{5, "[]"},
	} {
		pod := podWith("h", tc.n)
		if got := hintString(m.TopologyHints(pod, &pod.Spec.Containers[0])[widget]); got != tc.want {
			t.Errorf("request %d: hints %s, want %s", tc.n, got, tc.want)
		}
	}
	a := podWith("a", 2)
	if ok, _, msg := m.Admit(a, nil); !ok {
		t.Fatal(msg)
	}
	if got := m.ContainerDevices("a", "c0")[widget]; !slices.Equal(got, []string{"w0", "w1"}) {
		t.Fatalf("a got %v, want one NUMA node's pair", got)
	}
	if got := hintString(m.TopologyHints(a, &a.Spec.Containers[0])[widget]); got != "[{0 preferred} {0,1}]" {
		t.Errorf("hints of a's own devices: %s", got)
	}
	b := podWith("b", 2)
	if got := hintString(m.TopologyHints(b, &b.Spec.Containers[0])[widget]); got != "[{1 preferred} {0,1}]" {
		t.Errorf("hints with node 0 taken: %s", got)
	}
	// Devices without NUMA affinity: no preference.
	p.setDevices(devices(4, pluginapi.Healthy))
	waitFor(t, m.Manager, "devices without NUMA", func() bool {
		return hintString(m.TopologyHints(b, &b.Spec.Containers[0])[widget]) == "nil"
	})
	if _, ok := m.TopologyHints(b, &b.Spec.Containers[0])[widget]; !ok {
		t.Fatal("a requested resource without NUMA affinity should be listed with nil hints")
	}
}

// TestAllocationPacksNUMANode: without a plugin preference, a request is
// met from the one NUMA node that fits it most tightly.
func TestAllocationPacksNUMANode(t *testing.T) {
	m, p, _ := registered(t, 5, nil)
	p.setDevices(onNUMA(0, 1, 1, 0, 0))
	waitFor(t, m.Manager, "NUMA devices", func() bool {
		pod := podWith("x", 2)
		return hintString(m.TopologyHints(pod, &pod.Spec.Containers[0])[widget]) != "nil"
	})
	if ok, _, msg := m.Admit(podWith("a", 2), nil); !ok {
		t.Fatal(msg)
	}
	if got := m.ContainerDevices("a", "c0")[widget]; !slices.Equal(got, []string{"w1", "w2"}) {
		t.Fatalf("a got %v, want node 1's [w1 w2] (an exact fit)", got)
	}
}
