package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHashContainerStableAndSensitive(t *testing.T) {
	c := v1.Container{Name: "a", Image: "busybox:1", Command: []string{"sleep", "10"},
		Env: []v1.EnvVar{{Name: "X", Value: "1"}},
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
			v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("1"),
		}}}
	h := HashContainer(&c)
	// The hash must not depend on map order (resource lists) or the run.
	for i := 0; i < 20; i++ {
		cc := c
		cc.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
		if got := HashContainer(&cc); got != h {
			t.Fatalf("hash changed: %x vs %x", got, h)
		}
	}
	if h == 0 {
		t.Fatal("zero hash")
	}
	changed := c
	changed.Command = []string{"sleep", "11"}
	if HashContainer(&changed) == h {
		t.Fatal("command change did not change the hash")
	}
	changed = c
	changed.Image = "busybox:2"
	if HashContainer(&changed) == h {
		t.Fatal("image change did not change the hash")
	}
	if HashContainer(nil) != 0 {
		t.Fatal("nil container")
	}
}

func TestBackoffDoublesCapsAndExpires(t *testing.T) {
	_, _, clk := newTestManager(t, nil)
	b := newBackoff(clk, DefaultBackOffInitial, DefaultBackOffMax)
	now := clk.Now()
	var delays []int
	for i := 0; i < 7; i++ {
		b.next("k", now, "")
		_, d, _ := b.inBackOffSinceUpdate("k")
		delays = append(delays, int(d.Seconds()))
	}
	want := []int{10, 20, 40, 80, 160, 300, 300}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	clk.Step(2*DefaultBackOffMax + 1)
	if in, _, _ := b.inBackOffSinceUpdate("k"); in {
		t.Fatal("still in back-off after expiry")
	}
	b.next("k", clk.Now(), "")
	if _, d, _ := b.inBackOffSinceUpdate("k"); d != DefaultBackOffInitial {
		t.Fatalf("not reset: %v", d)
	}
	b.gc()
	if b.len() != 1 {
		t.Fatal("gc dropped a live entry")
	}
}

func TestNewValidatesConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Runtime") {
		t.Fatalf("err = %v", err)
	}
	cri := newStubCRI(nil)
	if _, err := New(Config{Runtime: cri}); err == nil || !strings.Contains(err.Error(), "Images") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(Config{Runtime: cri, Images: cri, CallTimeout: -1}); err == nil || !strings.Contains(err.Error(), "CallTimeout") {
		t.Fatalf("err = %v", err)
	}
	m, err := New(Config{Runtime: cri, Images: cri})
	if err != nil || m.cfg.CallTimeout != DefaultCallTimeout || m.cfg.PodLogsRoot != DefaultPodLogsRoot {
		t.Fatalf("defaults: %+v %v", m, err)
	}
}
