package qos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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

func pod(cs ...v1.Container) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{Containers: cs}} }

func TestClass(t *testing.T) {
	withInit := pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")))
	withInit.Spec.InitContainers = []v1.Container{ctr(rl("100m", ""), nil)}
	initOnly := pod(ctr(nil, nil))
	initOnly.Spec.InitContainers = []v1.Container{ctr(nil, rl("1", "1Gi"))}
	podLevel := pod(ctr(nil, nil))
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: rl("2", "2Gi"), Limits: rl("2", "2Gi")}
	podLevelBurst := pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")))
	podLevelBurst.Spec.Resources = &v1.ResourceRequirements{Requests: rl("1", "")}
	storageOnly := pod(ctr(v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, nil))
	zero := pod(ctr(rl("0", "0"), rl("0", "0")))
	cases := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing set", pod(ctr(nil, nil)), v1.PodQOSBestEffort},
		{"nil pod", nil, v1.PodQOSBestEffort},
		{"only ephemeral storage", storageOnly, v1.PodQOSBestEffort},
		{"zero quantities", zero, v1.PodQOSBestEffort},
		{"cpu request only", pod(ctr(rl("1", ""), nil)), v1.PodQOSBurstable},
		{"equal requests and limits", pod(ctr(rl("1", "1Gi"), rl("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"limits only, not defaulted", pod(ctr(nil, rl("1", "1Gi"))), v1.PodQOSBurstable},
		{"limits with requests defaulted from them", pod(ctr(rl("1", "1Gi"), rl("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"request below limit", pod(ctr(rl("1", "1Gi"), rl("2", "1Gi"))), v1.PodQOSBurstable},
		{"memory limit missing", pod(ctr(rl("1", ""), rl("1", ""))), v1.PodQOSBurstable},
		{"one container without limits", pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")), ctr(nil, nil)), v1.PodQOSBurstable},
		{"init container without limits", withInit, v1.PodQOSBurstable},
		{"only an init container sets limits", initOnly, v1.PodQOSBurstable},
		{"pod-level limits", podLevel, v1.PodQOSGuaranteed},
		{"pod-level request without limits", podLevelBurst, v1.PodQOSBurstable},
		{"status wins", &v1.Pod{Status: v1.PodStatus{QOSClass: v1.PodQOSBestEffort}, Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("1", ""), nil)}}}, v1.PodQOSBestEffort},
	}
	for _, c := range cases {
		if got := Class(c.pod); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestClassDoesNotAllocate(t *testing.T) {
	p := pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")), ctr(rl("100m", ""), rl("200m", "64Mi")))
	if n := testing.AllocsPerRun(100, func() { Class(p) }); n != 0 {
		t.Errorf("Class allocates %v times per call", n)
	}
}
