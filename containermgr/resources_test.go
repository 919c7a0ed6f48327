package containermgr

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a cpu/memory list; "" leaves a resource out.
func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func ctr(req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podWith(cs ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: cs}}
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestMilliCPUToQuota(t *testing.T) {
	cases := []struct {
		milli, period, want int64
	}{
		{0, 0, 0},
		{5, 100000, 1000}, // below the 1ms floor
		{9, 100000, 1000},
		{10, 100000, 1000},
		{200, 100000, 20000},
		{500, 100000, 50000},
		{1000, 100000, 100000},
		{1500, 100000, 150000},
		{100, 5000, 1000}, // a 5ms period floors at 1ms too
		{-5, 100000, 0},
	}
	for _, c := range cases {
		if got := MilliCPUToQuota(c.milli, c.period); got != c.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", c.milli, c.period, got, c.want)
		}
	}
}

func TestMilliCPUToShares(t *testing.T) {
	cases := map[int64]uint64{0: 2, 1: 2, 2: 2, 100: 102, 1000: 1024, 2500: 2560, 256000: 262144, 300000: 262144, 1 << 62: 262144, -1: 2}
	for milli, want := range cases {
		if got := MilliCPUToShares(milli); got != want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", milli, got, want)
		}
	}
}

// The linear v1 shares → v2 weight mapping.
func TestCPUWeight(t *testing.T) {
	cases := map[uint64]uint64{0: 1, 2: 1, 1024: 39, 262144: 10000, 1 << 40: 10000, 102: 4}
	for shares, want := range cases {
		if got := CPUWeight(shares); got != want {
			t.Errorf("CPUWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestResourceConfigForPod(t *testing.T) {
	const period = DefaultCPUPeriod
	tuned := uint64(5000)
	always := v1.ContainerRestartPolicyAlways
	sidecar := func(c v1.Container) v1.Container { c.RestartPolicy = &always; return c }
	mi := func(n int64) int64 { return n << 20 }
	cases := []struct {
		name string
		pod  *v1.Pod
		opts PodResourceOptions
		want ResourceConfig
	}{
		{"besteffort", podWith(ctr(nil, nil)), PodResourceOptions{}, ResourceConfig{CPUShares: u64(2)}},
		{"burstable without limits: shares only", podWith(ctr(rl("100m", "100Mi"), nil)), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(102)}},
		{"burstable with limits", podWith(ctr(rl("100m", "100Mi"), rl("200m", "200Mi"))), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(20000), CPUPeriod: u64(period), Memory: i64(mi(200))}},
		{"burstable with limits, quota off", podWith(ctr(rl("100m", "100Mi"), rl("200m", "200Mi"))), PodResourceOptions{DisableCPUQuota: true},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(-1), CPUPeriod: u64(period), Memory: i64(mi(200))}},
		{"burstable, one container without limits", podWith(ctr(rl("100m", "100Mi"), rl("200m", "200Mi")), ctr(rl("100m", "100Mi"), nil)), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(204)}},
		{"burstable, cpu limits everywhere, memory not", podWith(ctr(rl("100m", ""), rl("200m", "200Mi")), ctr(rl("100m", ""), rl("300m", ""))), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(204), CPUQuota: i64(50000), CPUPeriod: u64(period)}},
		{"burstable with limits, tuned period", podWith(ctr(rl("100m", "100Mi"), rl("200m", "200Mi"))), PodResourceOptions{CPUPeriod: tuned},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(1000), CPUPeriod: u64(tuned), Memory: i64(mi(200))}},
		{"guaranteed", podWith(ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(10000), CPUPeriod: u64(period), Memory: i64(mi(100))}},
		{"guaranteed, quota off", podWith(ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), PodResourceOptions{DisableCPUQuota: true},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(-1), CPUPeriod: u64(period), Memory: i64(mi(100))}},
		{"guaranteed, tuned period", podWith(ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), PodResourceOptions{CPUPeriod: tuned},
			ResourceConfig{CPUShares: u64(102), CPUQuota: i64(1000), CPUPeriod: u64(tuned), Memory: i64(mi(100))}},
		{"guaranteed from limits only (requests default to limits)", podWith(ctr(nil, rl("1", "1Gi"))), PodResourceOptions{},
			ResourceConfig{CPUShares: u64(2), CPUQuota: i64(100000), CPUPeriod: u64(period), Memory: i64(mi(1024))}},
		{"burstable with an init container without limits", &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{ctr(rl("500m", "50Mi"), nil)},
			Containers:     []v1.Container{ctr(rl("100m", "100Mi"), rl("200m", "200Mi"))},
		}}, PodResourceOptions{}, ResourceConfig{CPUShares: u64(512)}},
		{"init container larger than the app: the max wins", &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{ctr(rl("2", "1Gi"), rl("2", "1Gi"))},
			Containers:     []v1.Container{ctr(rl("1", "100Mi"), rl("1", "100Mi"))},
		}}, PodResourceOptions{}, ResourceConfig{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(period), Memory: i64(mi(1024))}},
		{"sidecar adds to the app and to later init containers", &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				sidecar(ctr(rl("500m", "100Mi"), rl("500m", "100Mi"))),
				ctr(rl("1", "100Mi"), rl("1", "100Mi")),
			},
			Containers: []v1.Container{ctr(rl("200m", "100Mi"), rl("200m", "100Mi"))},
		}}, PodResourceOptions{}, ResourceConfig{CPUShares: u64(1536), CPUQuota: i64(150000), CPUPeriod: u64(period), Memory: i64(mi(200))}},
		{"pod overhead added", &v1.Pod{Spec: v1.PodSpec{
			Overhead:   rl("250m", "120Mi"),
			Containers: []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))},
		}}, PodResourceOptions{}, ResourceConfig{CPUShares: u64(1280), CPUQuota: i64(125000), CPUPeriod: u64(period), Memory: i64(mi(1144))}},
		{"pids limit", podWith(ctr(nil, nil)), PodResourceOptions{PidsLimit: 1024}, ResourceConfig{CPUShares: u64(2), PidsLimit: i64(1024)}},
		{"pod-level resources", &v1.Pod{Spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: rl("1", "100Mi"), Limits: rl("2", "200Mi")},
			Containers: []v1.Container{ctr(nil, nil)},
		}}, PodResourceOptions{}, ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(200000), CPUPeriod: u64(period), Memory: i64(mi(200))}},
		{"hugepages carried", podWith(v1.Container{Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("6Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("6Mi")},
		}}), PodResourceOptions{}, ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(100000), CPUPeriod: u64(period), Memory: i64(mi(1024)),
			HugePageLimit: map[int64]int64{2 << 20: 6 << 20}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ResourceConfigForPod(c.pod, c.opts)
			if !reflect.DeepEqual(*got, c.want) {
				t.Fatalf("got  %s\nwant %s", show(got), show(&c.want))
			}
		})
	}
}

func show(rc *ResourceConfig) string {
	p := func(v any) string {
		switch x := v.(type) {
		case *uint64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		case *int64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		}
		return "nil"
	}
	return fmt.Sprintf("shares=%s quota=%s period=%s memory=%s pids=%s hugepages=%v", p(rc.CPUShares), p(rc.CPUQuota), p(rc.CPUPeriod), p(rc.Memory), p(rc.PidsLimit), rc.HugePageLimit)
}

func TestQOSClass(t *testing.T) {
	cases := []struct {
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{podWith(ctr(nil, nil)), v1.PodQOSBestEffort},
		{podWith(ctr(rl("1", ""), nil)), v1.PodQOSBurstable},
		{podWith(ctr(rl("1", "1Gi"), rl("1", "1Gi"))), v1.PodQOSGuaranteed},
		{podWith(ctr(nil, rl("1", "1Gi"))), v1.PodQOSBurstable}, // limits only, not defaulted
		{podWith(ctr(rl("1", "1Gi"), rl("2", "1Gi"))), v1.PodQOSBurstable},
		{podWith(ctr(rl("1", "1Gi"), rl("1", "1Gi")), ctr(nil, nil)), v1.PodQOSBurstable},
		{&v1.Pod{Status: v1.PodStatus{QOSClass: v1.PodQOSBestEffort}, Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("1", ""), nil)}}}, v1.PodQOSBestEffort},
		{nil, v1.PodQOSBestEffort},
	}
	for i, c := range cases {
		if got := QOSClass(c.pod); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}
