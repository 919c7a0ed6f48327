package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

var hbT0 = time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)

func hbNode() *v1.Node {
	n := initialNode()
	n.ResourceVersion = "41"
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "host-1"}}
	n.Status.Images = []v1.ContainerImage{{Names: []string{"busybox:1"}, SizeBytes: 1 << 20}, {Names: []string{"pause:3"}, SizeBytes: 1 << 10}}
	n.Status.NodeInfo = v1.NodeSystemInfo{KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64"}
	start := metav1.NewTime(hbT0.Add(-time.Hour))
	beat := metav1.NewTime(hbT0)
	for _, c := range []struct {
		t  v1.NodeConditionType
		st v1.ConditionStatus
	}{{v1.NodeMemoryPressure, v1.ConditionFalse}, {v1.NodeDiskPressure, v1.ConditionFalse}, {v1.NodePIDPressure, v1.ConditionFalse}, {v1.NodeReady, v1.ConditionTrue}} {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{
			Type: c.t, Status: c.st, Reason: "R" + string(c.t), Message: "m <&> " + string(c.t),
			LastHeartbeatTime: beat, LastTransitionTime: start,
		})
	}
	return n
}

func beatAll(n *v1.Node, d time.Duration) {
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(n.Status.Conditions[i].LastHeartbeatTime.Add(d))
	}
}

// canonicalJSON decodes a node's JSON into a v1.Node, encodes it again and
// decodes that into generic values, so two encodings of the same node
// compare equal whatever their key order or their explicit nulls.
func canonicalJSON(t *testing.T, data []byte) any {
	t.Helper()
	var n v1.Node
	if err := json.Unmarshal(data, &n); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	again, err := json.Marshal(&n)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(again, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHeartbeatPatchMatchesDiff(t *testing.T) {
	cases := []struct {
		name   string
		change func(n *v1.Node)
		fast   bool
	}{
		{"all heartbeats moved", func(n *v1.Node) { beatAll(n, 40*time.Second) }, true},
		{"one heartbeat moved", func(n *v1.Node) {
			n.Status.Conditions[2].LastHeartbeatTime = metav1.NewTime(hbT0.Add(time.Minute))
		}, true},
		{"heartbeat in another time zone", func(n *v1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(hbT0.Add(time.Minute).In(time.FixedZone("X", 3600)))
		}, true},
		{"heartbeat moved and the spec changed (never sent)", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Spec.Unschedulable = true
		}, true},
		{"condition type that needs escaping", func(n *v1.Node) {
			n.Status.Conditions[1].Type = "Vendor<&>\"X\""
		}, false}, // a type change: its own test below covers the escaping on the fast path
		{"heartbeat moved less than a second", func(n *v1.Node) { beatAll(n, 300*time.Millisecond) }, false},
		{"nothing changed", func(n *v1.Node) {}, false},
		{"heartbeat and a status changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions[3].Status = v1.ConditionFalse
			n.Status.Conditions[3].LastTransitionTime = n.Status.Conditions[3].LastHeartbeatTime
		}, false},
		{"heartbeat and a message changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions[0].Message = "other"
		}, false},
		{"heartbeat and a reason changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions[0].Reason = "Other"
		}, false},
		{"condition added", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: "Extra", Status: v1.ConditionTrue,
				LastHeartbeatTime: metav1.NewTime(hbT0.Add(time.Minute)), LastTransitionTime: metav1.NewTime(hbT0)})
		}, false},
		{"condition removed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions = n.Status.Conditions[1:]
		}, false},
		{"conditions reordered", func(n *v1.Node) {
			beatAll(n, time.Minute)
			c := n.Status.Conditions
			c[0], c[3] = c[3], c[0]
		}, false},
		{"heartbeat cleared", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Conditions[1].LastHeartbeatTime = metav1.Time{}
		}, false},
		{"heartbeat and a label changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Labels["team"] = "theirs"
		}, false},
		{"heartbeat and an annotation added", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Annotations = map[string]string{"a": "b"}
		}, false},
		{"heartbeat and the images changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Images = n.Status.Images[:1]
		}, false},
		{"heartbeat and an address changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Addresses[0].Address = "10.0.0.2"
		}, false},
		{"heartbeat and the capacity changed", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Capacity[v1.ResourceMemory] = resource.MustParse("1Gi")
		}, false},
		{"heartbeat and an equivalent quantity written differently", func(n *v1.Node) {
			beatAll(n, time.Minute)
			n.Status.Capacity[v1.ResourceCPU] = resource.MustParse("2000m")
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := hbNode()
			node := orig.DeepCopy()
			tc.change(node)
			fast, ok := heartbeatPatch(orig, node)
			if ok != tc.fast {
				t.Fatalf("fast path taken = %v, want %v (patch %s)", ok, tc.fast, fast)
			}
			slow, err := diffStatusPatch(orig, node)
			if err != nil {
				t.Fatal(err)
			}
			if ok && !bytes.Equal(fast, slow) {
				t.Errorf("fast patch differs from the diff:\nfast %s\ndiff %s", fast, slow)
			}
			patch, err := StatusPatch(orig, node)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(patch, slow) {
				t.Errorf("StatusPatch = %s, want %s", patch, slow)
			}
			// Applying the patch yields the new node (its spec left alone).
			origJSON, _ := json.Marshal(orig)
			merged, err := strategicpatch.StrategicMergePatch(origJSON, patch, v1.Node{})
			if err != nil {
				t.Fatal(err)
			}
			want := node.DeepCopy()
			want.Spec = orig.Spec
			wantJSON, _ := json.Marshal(want)
			if got, w := canonicalJSON(t, merged), canonicalJSON(t, wantJSON); !reflect.DeepEqual(got, w) {
				t.Errorf("patched node differs:\ngot  %s\nwant %s\npatch %s", merged, wantJSON, patch)
			}
		})
	}
}

func TestHeartbeatPatchEscapesTypes(t *testing.T) {
	orig := hbNode()
	orig.Status.Conditions[1].Type = "Vendor<&>\"X\""
	node := orig.DeepCopy()
	beatAll(node, time.Minute)
	fast, ok := heartbeatPatch(orig, node)
	if !ok {
		t.Fatal("fast path not taken")
	}
	slow, err := diffStatusPatch(orig, node)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fast, slow) {
		t.Errorf("fast patch differs from the diff:\nfast %s\ndiff %s", fast, slow)
	}
}

func TestHeartbeatPatchDuplicateTypesTakeDiff(t *testing.T) {
	orig := hbNode()
	orig.Status.Conditions[1].Type = orig.Status.Conditions[0].Type
	node := orig.DeepCopy()
	beatAll(node, time.Minute)
	if p, ok := heartbeatPatch(orig, node); ok {
		t.Errorf("fast path taken with duplicate condition types: %s", p)
	}
}

func TestStatusPatchNil(t *testing.T) {
	if _, err := StatusPatch(nil, hbNode()); err == nil {
		t.Error("no error for a nil original")
	}
	if _, err := StatusPatch(hbNode(), nil); err == nil {
		t.Error("no error for a nil node")
	}
}

func BenchmarkStatusPatchHeartbeat(b *testing.B) {
	orig := hbNode()
	node := orig.DeepCopy()
	beatAll(node, time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StatusPatch(orig, node); err != nil {
			b.Fatal(err)
		}
	}
}
