package downward

import (
	"errors"
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFormatMap(t *testing.T) {
	got := FormatMap(map[string]string{"b": "2", "a": "x\"y\n"})
	if want := "a=\"x\\\"y\\n\"\nb=\"2\""; got != want {
		t.Errorf("FormatMap = %q, want %q", got, want)
	}
	if got := FormatMap(nil); got != "" {
		t.Errorf("FormatMap(nil) = %q", got)
	}
}

func TestResourceValue(t *testing.T) {
	c := &v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), "hugepages-2Mi": resource.MustParse("4Mi")},
	}}
	alloc := func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	}
	cases := []struct {
		res, divisor string
		want         string
		err          bool
	}{
		{"limits.cpu", "", "2", false},                   // 1.5 rounded up
		{"limits.cpu", "1m", "1500", false},              //
		{"requests.cpu", "1m", "250", false},             //
		{"requests.memory", "1Mi", "64", false},          //
		{"limits.memory", "1Gi", "2", false},             // node allocatable
		{"limits.ephemeral-storage", "1Gi", "10", false}, // node allocatable
		{"limits.hugepages-2Mi", "1Mi", "4", false},      //
		{"requests.ephemeral-storage", "", "0", false},   // unset request
		{"limits.gpu", "", "", true},                     //
		{"cpu", "", "", true},                            //
		{"limits.cpu", "-1", "", true},                   //
	}
	for _, tc := range cases {
		ref := &v1.ResourceFieldSelector{Resource: tc.res}
		if tc.divisor != "" {
			ref.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := ResourceValue(c, ref, alloc)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s/%s: %q, %v; want %q (error %v)", tc.res, tc.divisor, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: error %v is not ErrUnsupported", tc.res, err)
		}
	}
	if _, err := ResourceValue(c, &v1.ResourceFieldSelector{Resource: "limits.memory"}, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unset limit with unknown allocatable: %v", err)
	}
	huge := &v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1e18")}}}
	if got, err := ResourceValue(huge, &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}, nil); err != nil || got != "9223372036854775000" {
		t.Errorf("huge cpu: %q, %v", got, err)
	}
}

func TestCeilDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{0, 1, 0}, {1, 1, 1}, {3, 2, 2}, {4, 2, 2}, {-5, 2, 0}, {5, 0, 0}, {math.MaxInt64, 1, math.MaxInt64}, {math.MaxInt64, 2, math.MaxInt64/2 + 1},
	} {
		if got := CeilDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("CeilDiv(%d,%d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestContainer(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}, InitContainers: []v1.Container{{Name: "i"}}}}
	if Container(pod, "i") == nil || Container(pod, "a") == nil || Container(pod, "x") != nil || Container(nil, "a") != nil {
		t.Error("Container lookup wrong")
	}
}
