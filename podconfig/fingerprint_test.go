package podconfig

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mutation sets one leaf field somewhere below a value to variant 1 or 2
// (two different non-zero values), creating pointers, slices and maps on
// the way.
type mutation struct {
	name  string
	apply func(v reflect.Value, variant int)
}

func leafMutations(t reflect.Type, name string, depth int, onPath map[reflect.Type]bool) []mutation {
	if depth > 12 || onPath[t] {
		return nil
	}
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return []mutation{{name, func(v reflect.Value, k int) {
			v.Set(reflect.ValueOf(resource.MustParse([]string{"", "1", "2"}[k])))
		}}}
	case reflect.TypeFor[metav1.Time]():
		return []mutation{{name, func(v reflect.Value, k int) {
			v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(int64(1000*k), 0))))
		}}}
	}
	onPath[t] = true
	defer delete(onPath, t)
	var out []mutation
	switch t.Kind() {
	case reflect.String:
		out = append(out, mutation{name, func(v reflect.Value, k int) { v.SetString([]string{"", "a", "b"}[k]) }})
	case reflect.Bool:
		out = append(out, mutation{name, func(v reflect.Value, k int) { v.SetBool(k == 1) }})
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out = append(out, mutation{name, func(v reflect.Value, k int) { v.SetInt(int64(k)) }})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		out = append(out, mutation{name, func(v reflect.Value, k int) { v.SetUint(uint64(k)) }})
	case reflect.Float32, reflect.Float64:
		out = append(out, mutation{name, func(v reflect.Value, k int) { v.SetFloat(float64(k)) }})
	case reflect.Pointer:
		for _, m := range leafMutations(t.Elem(), name, depth+1, onPath) {
			out = append(out, mutation{m.name, func(v reflect.Value, k int) {
				if v.IsNil() {
					v.Set(reflect.New(t.Elem()))
				}
				m.apply(v.Elem(), k)
			}})
		}
	case reflect.Slice:
		for _, m := range leafMutations(t.Elem(), name+"[0]", depth+1, onPath) {
			out = append(out, mutation{m.name, func(v reflect.Value, k int) {
				if v.Len() == 0 {
					v.Set(reflect.MakeSlice(t, 1, 1))
				}
				m.apply(v.Index(0), k)
			}})
		}
	case reflect.Map:
		for _, m := range leafMutations(t.Elem(), name+"[k]", depth+1, onPath) {
			out = append(out, mutation{m.name, func(v reflect.Value, k int) {
				if v.IsNil() {
					v.Set(reflect.MakeMap(t))
				}
				key := reflect.New(t.Key()).Elem()
				key.SetString("k")
				e := reflect.New(t.Elem()).Elem()
				if old := v.MapIndex(key); old.IsValid() {
					e.Set(old)
				}
				m.apply(e, k)
				v.SetMapIndex(key, e)
			}})
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			for _, m := range leafMutations(f.Type, name+"."+f.Name, depth+1, onPath) {
				out = append(out, mutation{m.name, func(v reflect.Value, k int) { m.apply(v.Field(i), k) }})
			}
		}
	}
	return out
}

// TestFingerprintSeesEveryField sets every leaf field of the spec and of
// the status, one at a time, and checks the right fingerprint changes (and
// the other does not).
func TestFingerprintSeesEveryField(t *testing.T) {
	f := newFingerprinter()
	base := mkPod("u", "p")
	baseSem, baseStatus := f.sums(base)
	for _, part := range []struct {
		name  string
		field func(*v1.Pod) reflect.Value
		typ   reflect.Type
	}{
		{"spec", func(p *v1.Pod) reflect.Value { return reflect.ValueOf(&p.Spec).Elem() }, reflect.TypeFor[v1.PodSpec]()},
		{"status", func(p *v1.Pod) reflect.Value { return reflect.ValueOf(&p.Status).Elem() }, reflect.TypeFor[v1.PodStatus]()},
	} {
		muts := leafMutations(part.typ, part.name, 0, map[reflect.Type]bool{})
		if len(muts) < 100 {
			t.Fatalf("%s: only %d leaf fields found", part.name, len(muts))
		}
		for _, m := range muts {
			var sums [3][2]uint64
			for k := 1; k <= 2; k++ {
				p := base.DeepCopy()
				m.apply(part.field(p), k)
				sums[k][0], sums[k][1] = f.sums(p)
			}
			moved, still := 1, 0 // index of the sum that must move / stay
			if part.name == "spec" {
				moved, still = 0, 1
			}
			base := [2]uint64{baseSem, baseStatus}
			if sums[1][moved] == base[moved] {
				t.Errorf("%s: setting it is not seen", m.name)
			}
			if sums[1][still] != base[still] {
				t.Errorf("%s: setting it changes the wrong fingerprint", m.name)
			}
			if sums[1][moved] == sums[2][moved] {
				t.Errorf("%s: two different values give the same fingerprint", m.name)
			}
		}
		t.Logf("%s: %d leaf fields checked", part.name, len(muts))
	}
}

func TestFingerprintChanges(t *testing.T) {
	f := newFingerprinter()
	mk := func() *v1.Pod {
		p := mkPod("u", "p")
		p.Labels = map[string]string{"app": "web"}
		p.Annotations = map[string]string{"note": "x", kubetypes.ConfigSourceAnnotation: "file", kubetypes.ConfigSeenAnnotation: "t1"}
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Ki")}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "1"}}
		p.Status.Phase = v1.PodRunning
		return p
	}
	grace := int64(5)
	now := metav1.NewTime(time.Unix(100, 0))
	cases := []struct {
		name           string
		change         func(*v1.Pod)
		semantic, stat bool // expected: spec-level change, status change
	}{
		{"nothing", func(*v1.Pod) {}, false, false},
		{"cpu 100m -> 0.1 (same value, same format)", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("0.1")
		}, false, false},
		{"memory 1Ki -> 1024 (same value, binary -> decimal)", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("1024")
		}, true, false},
		{"cpu 100m -> 200m", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("200m")
		}, true, false},
		{"cpu 100m -> 100", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("100")
		}, true, false},
		{"quantity as inf.Dec", func(p *v1.Pod) {
			q := resource.MustParse("100m")
			q.ToDec()
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = q
		}, false, false},
		{"cpu 100m -> 1n (below a thousandth)", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("1n")
		}, true, false},
		{"cpu 100m -> 1e20 (beyond int64 thousandths)", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("1e20")
		}, true, false},
		{"request added", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
		}, true, false},
		{"limit moved to request", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
			delete(p.Spec.Containers[0].Resources.Limits, v1.ResourceCPU)
		}, true, false},
		{"image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "img:2" }, true, false},
		{"env value", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Value = "2" }, true, false},
		{"env nil vs empty", func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{} }, false, false},
		{"containers swapped", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "i"})
			p.Spec.Containers[0], p.Spec.Containers[1] = p.Spec.Containers[1], p.Spec.Containers[0]
		}, true, false},
		{"security context set empty", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{} }, true, false},
		{"label value", func(p *v1.Pod) { p.Labels["app"] = "db" }, true, false},
		{"label key and value swapped", func(p *v1.Pod) { p.Labels = map[string]string{"web": "app"} }, true, false},
		{"label added", func(p *v1.Pod) { p.Labels["x"] = "" }, true, false},
		{"annotation", func(p *v1.Pod) { p.Annotations["note"] = "y" }, true, false},
		{"local annotations only", func(p *v1.Pod) {
			p.Annotations[kubetypes.ConfigSeenAnnotation] = "t2"
			p.Annotations[kubetypes.ConfigMirrorAnnotation] = "m"
			delete(p.Annotations, kubetypes.ConfigSourceAnnotation)
		}, false, false},
		{"deletion timestamp", func(p *v1.Pod) { p.DeletionTimestamp = &now }, true, false},
		{"deletion grace", func(p *v1.Pod) { p.DeletionGracePeriodSeconds = &grace }, true, false},
		{"resource version and other metadata", func(p *v1.Pod) { p.ResourceVersion = "7"; p.Generation = 3 }, false, false},
		{"phase", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }, false, true},
		{"condition time", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, LastTransitionTime: now}}
		}, false, true},
	}
	ref := mk()
	sem0, stat0 := f.sums(ref)
	for _, tc := range cases {
		p := mk()
		tc.change(p)
		sem, stat := f.sums(p)
		if (sem != sem0) != tc.semantic || (stat != stat0) != tc.stat {
			t.Errorf("%s: semantic change %v (want %v), status change %v (want %v)", tc.name, sem != sem0, tc.semantic, stat != stat0, tc.stat)
		}
	}
	// Through the merge: the notation change is no update, a value change is.
	c, _ := newTestConfig(t, Incremental)
	c.Merge("file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{mk()}})
	p := mk()
	p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("0.1")
	if out := c.Merge("file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{p}}); len(out) != 0 {
		t.Fatalf("100m -> 0.1 gave %v", summary(out))
	}
	p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("0.2")
	if out := c.Merge("file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{p}}); len(out) != 1 || out[0].Op != kubetypes.UPDATE {
		t.Fatalf("100m -> 0.2 gave %v", summary(out))
	}
}

func TestFingerprintQuantityPaths(t *testing.T) {
	f := newFingerprinter()
	for _, pair := range [][2]string{{"1n", "0.000000001"}, {"1e20", "100000000000000000000"}, {"1.5", "1500m"}, {"2", "2000m"}} {
		a, b := resource.MustParse(pair[0]), resource.MustParse(pair[1])
		b.ToDec() // the other internal form
		if a.Format != b.Format {
			b.Format = a.Format
		}
		if f.mixQuantity(1, &a) != f.mixQuantity(1, &b) {
			t.Errorf("%s and %s differ", pair[0], pair[1])
		}
	}
	a, b := resource.MustParse("1n"), resource.MustParse("2n")
	if f.mixQuantity(1, &a) == f.mixQuantity(1, &b) {
		t.Errorf("1n and 2n are the same")
	}
}

func TestFingerprintAllocs(t *testing.T) {
	f := newFingerprinter()
	p := benchPod(0, 1)
	f.sums(p)
	if n := testing.AllocsPerRun(100, func() { f.sums(p) }); n != 0 {
		t.Fatalf("%v allocations per fingerprint", n)
	}
}
