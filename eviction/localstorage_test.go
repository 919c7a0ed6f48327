package eviction

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// lsPod is a pod whose containers have the given ephemeral-storage limits
// ("" = none), with an emptyDir "data" of the given sizeLimit ("" = none).
func lsPod(name, sizeLimit string, limits ...string) *v1.Pod {
	p := mkPod(name, 0, "", "")
	p.Spec.Containers = nil
	for i, l := range limits {
		c := v1.Container{Name: string(rune('a' + i))}
		if l != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(l)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	ed := &v1.EmptyDirVolumeSource{}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		ed.SizeLimit = &q
	}
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: ed}}}
	return p
}

// lsStats is a pod's disk use: the emptyDir "data", and per container
// (a, b, ...) its writable layer and logs, in MiB.
func lsStats(name string, dataMi uint64, ctrs ...[2]uint64) PodStats {
	p := PodStats{UID: types.UID(name), VolumeBytes: mi(dataMi), Volumes: []VolumeStats{{Name: "data", UsedBytes: mi(dataMi)}}}
	for i, c := range ctrs {
		p.Containers = append(p.Containers, ContainerStats{Name: string(rune('a' + i)), RootfsBytes: mi(c[0]), LogsBytes: mi(c[1])})
		p.RootfsBytes += mi(c[0])
		p.LogsBytes += mi(c[1])
	}
	return p
}

// TestLocalStorageEviction: in one cycle, with no threshold configured
// and no pressure, every pod over a local storage limit is evicted at
// once (grace 1) with the kubelet's reason and message, checked in the
// kubelet's order (emptyDir sizeLimit, pod limit, container limit); pods
// within their limits, and a critical pod over its limit, stay.
func TestLocalStorageEviction(t *testing.T) {
	static := lsPod("static", "1Mi", "")
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceFile}
	pods := []*v1.Pod{
		lsPod("emptydir", "1Mi", "100Mi"),     // data 2Mi > sizeLimit 1Mi
		lsPod("pod", "", "3Mi"),               // 1+1+2 = 4Mi > pod limit 3Mi
		lsPod("container", "", "2Mi", "10Mi"), // a: 2Mi rootfs + 1Mi logs > 2Mi; pod 3Mi < 12Mi
		lsPod("fits", "4Mi", "3Mi", "3Mi"),    // data 2Mi, a 1Mi, b 1Mi: within all
		lsPod("nolimits", "", "", ""),         // 50Mi, no limit
		lsPod("unmeasured", "1Mi", "1Mi"),     // no stats
		static,                                // critical: not evicted
		lsPod("equal", "2Mi", "", ""),         // exactly at the sizeLimit: stays
	}
	h := newHarness(t, nil, pods, Config{})
	h.stats.s = &Summary{Pods: []PodStats{
		lsStats("emptydir", 2, [2]uint64{0, 0}),
		lsStats("pod", 2, [2]uint64{1, 1}),
		lsStats("container", 0, [2]uint64{2, 1}, [2]uint64{0, 0}),
		lsStats("fits", 2, [2]uint64{1, 0}, [2]uint64{0, 1}),
		lsStats("nolimits", 50, [2]uint64{0, 0}, [2]uint64{0, 0}),
		lsStats("static", 5, [2]uint64{0, 0}),
		lsStats("equal", 2, [2]uint64{0, 0}, [2]uint64{0, 0}),
	}}
	got := h.sync(t)
	want := map[string]string{
		"emptydir":  `Usage of EmptyDir volume "data" exceeds the limit "1Mi". `,
		"pod":       "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. ",
		"container": `Container a exceeded its local ephemeral storage limit "2Mi". `,
	}
	if len(got) != len(want) || len(h.kills) != len(want) {
		t.Fatalf("evicted %d pods (%d kills), want %d: %v", len(got), len(h.kills), len(want), h.kills)
	}
	for _, k := range h.kills {
		msg, ok := want[k.pod.Name]
		if !ok {
			t.Errorf("pod %s evicted: %q", k.pod.Name, k.status.Message)
			continue
		}
		if k.status.Phase != v1.PodFailed || k.status.Reason != Reason || k.status.Message != msg {
			t.Errorf("pod %s: %s %s %q, want Failed Evicted %q", k.pod.Name, k.status.Phase, k.status.Reason, k.status.Message, msg)
		}
		if k.grace != 1 {
			t.Errorf("pod %s: grace %d, want 1", k.pod.Name, k.grace)
		}
		if len(k.status.Conditions) != 0 {
			t.Errorf("pod %s: conditions %v, want none (the kubelet sets no DisruptionTarget here)", k.pod.Name, k.status.Conditions)
		}
	}
	if h.m.IsUnderDiskPressure() {
		t.Error("local storage eviction reported DiskPressure")
	}
}

// TestLocalStorageEvictionDedicatedImageFs: with images (and writable
// layers) on their own file system, a container's limit counts its logs
// only; the pod's limit still counts everything.
func TestLocalStorageEvictionDedicatedImageFs(t *testing.T) {
	pods := []*v1.Pod{lsPod("layer", "", "2Mi", "10Mi"), lsPod("logs", "", "2Mi", "10Mi")}
	h := newHarness(t, nil, pods, Config{})
	h.stats.s = &Summary{ImageFs: &FsStats{AvailableBytes: gi, CapacityBytes: 2 * gi}, NodeFs: &FsStats{AvailableBytes: gi, CapacityBytes: 2 * gi},
		Pods: []PodStats{
			lsStats("layer", 0, [2]uint64{5, 1}, [2]uint64{0, 0}),
			lsStats("logs", 0, [2]uint64{0, 3}, [2]uint64{0, 0}),
		}}
	got := h.sync(t)
	if len(got) != 1 || got[0].Name != "logs" {
		t.Fatalf("evicted %v, want only the pod whose logs exceed the limit", h.kills)
	}
}

// TestLocalStorageEvictionDisabled: DisableLocalStorageCapacityIsolation
// turns the checks off.
func TestLocalStorageEvictionDisabled(t *testing.T) {
	h := newHarness(t, DefaultThresholds(), []*v1.Pod{lsPod("emptydir", "1Mi", "")}, Config{DisableLocalStorageCapacityIsolation: true})
	h.stats.s = &Summary{Pods: []PodStats{lsStats("emptydir", 5, [2]uint64{0, 0})}}
	if got := h.sync(t); len(got) != 0 {
		t.Fatalf("evicted %v with local storage isolation off", h.kills)
	}
}

// TestPodEphemeralStorageLimit: the pod's limit as the API computes pod
// limits (pod-level, else containers + sidecars, or a larger init).
func TestPodEphemeralStorageLimit(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	lim := func(q string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}}
	}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want string
	}{
		{"none", v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}, ""},
		{"sum", v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: lim("1Mi")}, {Name: "b", Resources: lim("2Mi")}, {Name: "c"}}}, "3Mi"},
		{"sidecar", v1.PodSpec{
			InitContainers: []v1.Container{{Name: "s", RestartPolicy: &always, Resources: lim("1Mi")}},
			Containers:     []v1.Container{{Name: "a", Resources: lim("2Mi")}}}, "3Mi"},
		{"big init", v1.PodSpec{
			InitContainers: []v1.Container{{Name: "s", RestartPolicy: &always, Resources: lim("1Mi")}, {Name: "i", Resources: lim("10Mi")}},
			Containers:     []v1.Container{{Name: "a", Resources: lim("2Mi")}}}, "11Mi"},
		{"pod level", v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("5Mi")}},
			Containers: []v1.Container{{Name: "a", Resources: lim("2Mi")}}}, "5Mi"},
	} {
		q, ok := podEphemeralStorageLimit(&v1.Pod{Spec: tc.spec})
		got := ""
		if ok {
			got = q.String()
		}
		if got != tc.want {
			t.Errorf("%s: limit %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUpdateContainerFsThresholds: containerfs thresholds follow nodefs
// on one file system and when only images are apart, imagefs when images
// and writable layers share a file system of their own; given ones are
// replaced with an error.
func TestUpdateContainerFsThresholds(t *testing.T) {
	hard, err := ParseThresholds(map[string]string{
		"nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "4%",
	}, map[string]string{"nodefs.available": "20%"}, map[string]string{"nodefs.available": "1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	derived := func(ts []Threshold) string {
		var out []string
		for _, x := range ts {
			if x.Signal == SignalContainerFsAvailable || x.Signal == SignalContainerFsInodesFree {
				out = append(out, x.String())
			}
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		imageFs, split bool
		want           string
	}{
		{false, false, "containerfs.available<10%,containerfs.available<20% grace=1m0s,containerfs.inodesFree<5%"},
		{true, true, "containerfs.available<10%,containerfs.available<20% grace=1m0s,containerfs.inodesFree<5%"},
		{true, false, "containerfs.available<15%,containerfs.inodesFree<4%"},
		{false, true, ""},
	} {
		got, err := UpdateContainerFsThresholds(hard, tc.imageFs, tc.split)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(derived(got), ",")
		slices.Sort(parts)
		if g := strings.Join(parts, ","); g != tc.want {
			t.Errorf("imageFs %v split %v: %s, want %s", tc.imageFs, tc.split, g, tc.want)
		}
	}
	given := append(hard[:len(hard):len(hard)], Threshold{Signal: SignalContainerFsAvailable, Value: ThresholdValue{Percentage: 0.5}})
	got, err := UpdateContainerFsThresholds(given, false, false)
	if err == nil || strings.Contains(derived(got), "50%") {
		t.Errorf("a given containerfs threshold: %v kept %s", err, derived(got))
	}
	// The manager derives them from the first Summary's layout.
	h := newHarness(t, hard, nil, Config{})
	h.stats.s = &Summary{NodeFs: &FsStats{AvailableBytes: gi, CapacityBytes: 2 * gi}, ImageFs: &FsStats{AvailableBytes: gi, CapacityBytes: 2 * gi}}
	h.sync(t)
	if d := derived(h.m.Thresholds()); !strings.Contains(d, "containerfs.available<15%") || strings.Contains(d, "10%") {
		t.Errorf("manager over a dedicated image fs derived %s", d)
	}
}
