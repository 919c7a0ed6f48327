package downward_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/downward"
)

func ExampleResourceValue() {
	c := &v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
	}}
	mib, _ := downward.ResourceValue(c, &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, nil)
	fmt.Println(mib)
	fmt.Println(downward.FormatMap(map[string]string{"tier": "edge", "app": "web"}))
	// Output:
	// 128
	// app="web"
	// tier="edge"
}
