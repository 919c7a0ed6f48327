package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(pairs ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func podWith(containers ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: containers}}
}

func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func TestCfgMilliCPUToShares(t *testing.T) {
	for _, tc := range []struct {
		milli, want int64
	}{
		{0, 2}, {1, 2}, {-5, 2}, {2, 2}, {3, 3}, {10, 10}, {100, 102}, {500, 512}, {1000, 1024},
		{256000, 262144}, {257000, 262144}, {1 << 62, 262144},
	} {
		if got := milliCPUToShares(tc.milli); got != tc.want {
			t.Errorf("milliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.want)
		}
	}
}

func TestCfgMilliCPUToQuota(t *testing.T) {
	for _, tc := range []struct {
		milli, want int64
	}{
		{0, 0}, {1, 1000}, {5, 1000}, {9, 1000}, {10, 1000}, {11, 1100}, {200, 20000}, {500, 50000},
		{1000, 100000}, {1500, 150000}, {256000, 25600000},
	} {
		if got := milliCPUToQuota(tc.milli, cpuQuotaPeriod); got != tc.want {
			t.Errorf("milliCPUToQuota(%d) = %d, want %d", tc.milli, got, tc.want)
		}
	}
}

func TestCfgQoSClass(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"empty", podWith(), v1.PodQOSBestEffort},
		{"no resources", podWith(ctr("a", nil, nil)), v1.PodQOSBestEffort},
		{"only extended", podWith(ctr("a", rl("nvidia.com/gpu", "1"), rl("nvidia.com/gpu", "1"))), v1.PodQOSBestEffort},
		{"zero request", podWith(ctr("a", rl("cpu", "0"), nil)), v1.PodQOSBestEffort},
		{"guaranteed", podWith(ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))), v1.PodQOSGuaranteed},
		// Without API defaulting (requests := limits) the kubelet computes Burstable too.
		{"limits only, undefaulted", podWith(ctr("a", nil, rl("cpu", "1", "memory", "1Gi"))), v1.PodQOSBurstable},
		{"cpu only", podWith(ctr("a", rl("cpu", "1"), rl("cpu", "1"))), v1.PodQOSBurstable},
		{"unequal", podWith(ctr("a", rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))), v1.PodQOSBurstable},
		{"one besteffort container", podWith(ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")), ctr("b", nil, nil)), v1.PodQOSBurstable},
		{"init without limits", &v1.Pod{Spec: v1.PodSpec{
			Containers:     []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))},
			InitContainers: []v1.Container{{Name: "i", RestartPolicy: &always}},
		}}, v1.PodQOSBurstable},
		{"status wins", &v1.Pod{Status: v1.PodStatus{QOSClass: v1.PodQOSGuaranteed}}, v1.PodQOSGuaranteed},
		{"pod level guaranteed", &v1.Pod{Spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "2Gi"), Requests: rl("cpu", "2", "memory", "2Gi")},
			Containers: []v1.Container{ctr("a", nil, nil)},
		}}, v1.PodQOSGuaranteed},
		{"pod level burstable", &v1.Pod{Spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: rl("memory", "1Gi")},
			Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))},
		}}, v1.PodQOSBurstable},
	} {
		if got := qosClass(tc.pod); got != tc.want {
			t.Errorf("%s: qosClass = %s, want %s", tc.name, got, tc.want)
		}
	}
	if qosClass(nil) != v1.PodQOSBestEffort {
		t.Error("nil pod is not BestEffort")
	}
}

func TestCfgOOMScoreAdj(t *testing.T) {
	const capacity = int64(4) << 30 // 4 GiB
	prio := int32(2000001000)
	always := v1.ContainerRestartPolicyAlways
	sidecarPod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("memory", "1Mi")}}},
		Containers:     []v1.Container{ctr("a", rl("memory", "1Gi"), nil), ctr("b", rl("memory", "2Gi"), nil)},
	}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		c    int // index into containers; -1 = first init container
		want int64
	}{
		{"guaranteed", podWith(ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))), 0, -997},
		{"besteffort", podWith(ctr("a", nil, nil)), 0, 1000},
		{"burstable no memory request", podWith(ctr("a", rl("cpu", "1"), nil)), 0, 999},
		{"burstable 1Gi of 4Gi", podWith(ctr("a", rl("memory", "1Gi"), nil)), 0, 750},
		{"burstable all memory", podWith(ctr("a", rl("memory", "4Gi"), nil)), 0, 3},
		{"burstable more than memory", podWith(ctr("a", rl("memory", "64Gi"), nil)), 0, 3},
		{"burstable tiny request", podWith(ctr("a", rl("memory", "1"), nil)), 0, 999},
		{"node critical burstable", &v1.Pod{Spec: v1.PodSpec{Priority: &prio, PriorityClassName: "system-node-critical",
			Containers: []v1.Container{ctr("a", rl("memory", "1Gi"), nil)}}}, 0, -997},
		{"critical but not node critical", &v1.Pod{Spec: v1.PodSpec{Priority: &prio, PriorityClassName: "system-cluster-critical",
			Containers: []v1.Container{ctr("a", rl("memory", "1Gi"), nil)}}}, 0, 750},
		{"sidecar capped by smallest regular", sidecarPod, -1, 750},
	} {
		var c *v1.Container
		if tc.c < 0 {
			c = &tc.pod.Spec.InitContainers[0]
		} else {
			c = &tc.pod.Spec.Containers[tc.c]
		}
		if got := oomScoreAdj(tc.pod, c, capacity); got != tc.want {
			t.Errorf("%s: oomScoreAdj = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Unknown capacity uses the default and never divides by zero.
	p := podWith(ctr("a", rl("memory", "8Gi"), nil))
	if got := oomScoreAdj(p, &p.Spec.Containers[0], 0); got != 500 {
		t.Errorf("default capacity: got %d, want 500 (8Gi of 16Gi)", got)
	}
}

func TestCfgContainerLinuxResources(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		req, lim                v1.ResourceList
		shares, quota, memLimit int64
	}{
		{"none", nil, nil, 2, 0, 0},
		{"1m request", rl("cpu", "1m"), nil, 2, 0, 0},
		{"1m limit", nil, rl("cpu", "1m"), 2, 1000, 0},
		{"0 request, limit 1", rl("cpu", "0"), rl("cpu", "1"), 2, 100000, 0},
		{"limit only", nil, rl("cpu", "500m", "memory", "128Mi"), 512, 50000, 128 << 20},
		{"256 cores", rl("cpu", "256"), rl("cpu", "256"), 262144, 25600000, 0},
		{"300 cores", rl("cpu", "300"), nil, 262144, 0, 0},
		{"huge", rl("cpu", "1e15"), rl("cpu", "1e15", "memory", "1e15"), 262144, maxMilliCPU * cpuQuotaPeriod / 1000, 1e15},
	} {
		p := podWith(ctr("a", tc.req, tc.lim))
		r := containerLinuxResources(p, &p.Spec.Containers[0], 1<<30)
		if r.CpuShares != tc.shares || r.CpuQuota != tc.quota || r.MemoryLimitInBytes != tc.memLimit || r.CpuPeriod != 100000 {
			t.Errorf("%s: shares %d quota %d period %d mem %d; want %d %d 100000 %d", tc.name,
				r.CpuShares, r.CpuQuota, r.CpuPeriod, r.MemoryLimitInBytes, tc.shares, tc.quota, tc.memLimit)
		}
	}
}

func TestCfgPodLevelLimitsFallback(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{
		Resources:  &v1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi")},
		Containers: []v1.Container{ctr("a", rl("cpu", "100m"), nil)},
	}}
	r := containerLinuxResources(p, &p.Spec.Containers[0], 1<<30)
	if r.CpuQuota != 200000 || r.MemoryLimitInBytes != 1<<30 || r.CpuShares != 102 {
		t.Errorf("pod-level fallback: %+v", r)
	}
}

func TestCfgHugepageLimits(t *testing.T) {
	p := podWith(ctr("a", nil, rl("hugepages-2Mi", "20Mi", "hugepages-1Gi", "2Gi", "memory", "1Gi")))
	r := containerLinuxResources(p, &p.Spec.Containers[0], 1<<30)
	if len(r.HugepageLimits) != 2 {
		t.Fatalf("hugepages: %v", r.HugepageLimits)
	}
	if r.HugepageLimits[0].PageSize != "1GB" || r.HugepageLimits[0].Limit != 2<<30 ||
		r.HugepageLimits[1].PageSize != "2MB" || r.HugepageLimits[1].Limit != 20<<20 {
		t.Errorf("hugepages: %v", r.HugepageLimits)
	}
	// A malformed page size is ignored, not a panic.
	p = podWith(ctr("a", nil, rl("hugepages-abc", "1Mi", "hugepages-3000", "1Mi")))
	if r := containerLinuxResources(p, &p.Spec.Containers[0], 1<<30); len(r.HugepageLimits) != 0 {
		t.Errorf("bad page sizes: %v", r.HugepageLimits)
	}
}

func TestCfgSandboxResources(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{
			ctr("a", rl("cpu", "100m", "memory", "100Mi"), rl("cpu", "200m", "memory", "200Mi")),
			ctr("b", rl("cpu", "300m"), rl("cpu", "400m")),
		},
		InitContainers: []v1.Container{
			ctr("init", rl("cpu", "2"), rl("cpu", "2")),
			{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "100m")}},
		},
		Overhead: rl("cpu", "250m", "memory", "64Mi"),
	}}
	r := sandboxResources(p)
	// requests: max(100+300+100 = 500m, init 2000m) = 2000m -> 2048 shares.
	// limits: cpu max(200+400+100 = 700m, 2000m) = 2 cores, memory 200Mi.
	if r.CpuShares != 2048 || r.CpuQuota != 200000 || r.MemoryLimitInBytes != 200<<20 {
		t.Errorf("sandbox resources: %+v", r)
	}
	o := overheadResources(p)
	if o.CpuShares != 256 || o.CpuQuota != 25000 || o.MemoryLimitInBytes != 64<<20 {
		t.Errorf("overhead: %+v", o)
	}
	if o := overheadResources(podWith()); o.CpuShares != 0 || o.CpuQuota != 0 {
		t.Errorf("no overhead: %+v", o)
	}
}
