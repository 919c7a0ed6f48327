package kubeletconfig_test

import (
	"fmt"

	"github.com/nodekit/nodekit/kubeletconfig"
)

func ExampleDecode() {
	c, err := kubeletconfig.Decode([]byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 30
nodeStatusUpdateFrequency: 4s
`))
	if err != nil {
		panic(err)
	}
	kubeletconfig.SetDefaults(c)
	fmt.Println("maxPods:", c.MaxPods, "syncFrequency:", c.SyncFrequency.Duration,
		"nodeStatusReportFrequency:", c.NodeStatusReportFrequency.Duration)

	_, err = kubeletconfig.Decode([]byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 30
maxPod: 31
`))
	fmt.Println(err)
	// Output:
	// maxPods: 30 syncFrequency: 1m0s nodeStatusReportFrequency: 4s
	// kubeletconfig: cannot decode: unknown field "maxPod"
}

func ExampleValidate() {
	c, _ := kubeletconfig.Decode([]byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: -1
imageGCHighThresholdPercent: 50
imageGCLowThresholdPercent: 60
`))
	kubeletconfig.SetDefaults(c)
	fmt.Println(kubeletconfig.Validate(c, kubeletconfig.ValidateOptions{}))
	// Output:
	// kubeletconfig: invalid configuration (2 problems):
	//   - invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50
	//   - invalid configuration: maxPods (--max-pods) -1 must not be a negative number
}
