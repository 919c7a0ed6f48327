package benchmarks

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	_ "unsafe" // go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	_ "k8s.io/component-helpers/node/util"

	"github.com/nodekit/nodekit/nodestatus/apiserver"
)

// The patch a node agent sends when only the conditions' heartbeat times
// moved (the periodic status report). The kubelet computes it in
// k8s.io/component-helpers/node/util.PatchNodeStatus before the PATCH
// call; the computation is unexported (preparePatchBytesforNodeStatus) and
// linked to by name here, so that the API call (a fake clientset would
// dominate) is left out on both sides. nodekit's is
// nodestatus/apiserver.StatusPatch.

//go:linkname kubeletNodeStatusPatch k8s.io/component-helpers/node/util.preparePatchBytesforNodeStatus
func kubeletNodeStatusPatch(nodeName types.NodeName, oldNode *v1.Node, newNode *v1.Node) ([]byte, error)

// benchNode: a node as the API server holds it after a while: labels,
// capacity, five conditions, addresses, node info, 30 images.
func benchNode(hb time.Time) *v1.Node {
	t := metav1.NewTime(hb)
	start := metav1.NewTime(hb.Add(-time.Hour))
	cond := func(typ v1.NodeConditionType, st v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: start}
	}
	rl := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-2Mi": resource.MustParse("0"), "hugepages-1Gi": resource.MustParse("0"),
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid", ResourceVersion: "12345",
			Labels: map[string]string{"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
		Status: v1.NodeStatus{
			Capacity: rl, Allocatable: rl.DeepCopy(),
			Conditions: []v1.NodeCondition{
				cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
				cond("NetworkUnavailable", v1.ConditionFalse, "RouteCreated", "route created"),
			},
			Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.11"}, {Type: v1.NodeHostName, Address: "node-1"}},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
			NodeInfo: v1.NodeSystemInfo{MachineID: "m", SystemUUID: "s", BootID: "b", KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12",
				ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	for i := range 30 {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.local/img%d@sha256:%064d", i, i), fmt.Sprintf("registry.local/img%d:1.%d", i, i)},
			SizeBytes: int64(1000000 * (i + 1)),
		})
	}
	return n
}

func heartbeatPair() (old, cur *v1.Node) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old = benchNode(t0)
	cur = old.DeepCopy()
	for i := range cur.Status.Conditions {
		cur.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(t0.Add(5 * time.Minute))
	}
	return old, cur
}

func checkNodePatchSame(tb testing.TB) {
	tb.Helper()
	old, cur := heartbeatPair()
	a, err := apiserver.StatusPatch(old, cur)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := kubeletNodeStatusPatch("node-1", old, cur)
	if err != nil {
		tb.Fatal(err)
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatal(err)
	}
	if !reflect.DeepEqual(x, y) {
		tb.Fatalf("heartbeat patch differs:\nnodekit %s\nkubelet %s", a, b)
	}
}

func TestNodeStatusSamePatch(t *testing.T) { checkNodePatchSame(t) }

// BenchmarkNodeStatusHeartbeatPatch: the patch bytes for a status in which
// only the five heartbeat times moved.
func BenchmarkNodeStatusHeartbeatPatch(b *testing.B) {
	checkNodePatchSame(b)
	old, cur := heartbeatPair()
	b.Run("nodekit", func(b *testing.B) {
		loop(b, func() {
			if _, err := apiserver.StatusPatch(old, cur); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("kubelet", func(b *testing.B) {
		loop(b, func() {
			if _, err := kubeletNodeStatusPatch("node-1", old, cur); err != nil {
				b.Fatal(err)
			}
		})
	})
}
