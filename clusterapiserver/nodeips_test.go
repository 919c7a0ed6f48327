package clusterapiserver

import (
	"net"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodestatus"
)

// TestNodeIPsFollowTheStoredNode: the pods' host IPs are worked out from
// the configuration until the node is reported, then follow the Node as
// stored, except for the first report (the registration, which may return
// the Node as a previous agent left it).
func TestNodeIPsFollowTheStoredNode(t *testing.T) {
	node := func(ips ...string) *v1.Node {
		n := &v1.Node{}
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
		return n
	}
	n := &nodeIPs{addresses: nodestatus.AddressConfig{NodeIPs: []net.IP{net.ParseIP("192.0.2.7")}}, nodeName: "n1"}
	check := func(step string, want ...string) {
		t.Helper()
		if got := n.get(); !slices.Equal(got, want) {
			t.Fatalf("%s: host IPs %v, want %v", step, got, want)
		}
	}
	check("before any report", "192.0.2.7")
	n.reported(node("203.0.113.9")) // registration: the Node as left before
	check("after the registration", "192.0.2.7")
	n.reported(node("198.51.100.3", "2001:db8::3"))
	check("after a status update", "198.51.100.3", "2001:db8::3")
	n.reported(node()) // no address: keep the last
	check("after a report without addresses", "198.51.100.3", "2001:db8::3")

	// No usable address configured or found: none.
	none := &nodeIPs{addresses: nodestatus.AddressConfig{HostIPs: func() ([]net.IP, error) { return nil, nil }}, nodeName: "n1"}
	if got := none.get(); got != nil {
		t.Fatalf("without an address: %v, want none", got)
	}
}
