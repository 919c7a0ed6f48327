package managers_test

import (
	"fmt"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubeletconfig"
	"github.com/nodekit/nodekit/kubeletconfig/managers"
)

func ExamplePart() {
	c, _ := kubeletconfig.Decode([]byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupRoot: /system.slice
kubeReserved: {memory: 256Mi}
`))
	kubeletconfig.SetDefaults(c)
	_, err := kubeletconfig.Apply(nodekit.NewBuilder(), c, kubeletconfig.Options{
		Parts: []kubeletconfig.Part{managers.Part(managers.Options{StateDir: "/var/lib/nodekit"})},
	})
	fmt.Println(err)
	// Output:
	// cgroups and resource managers: kubeletconfig: a value the agent cannot honour: cgroupRoot: "/system.slice": the agent's pods cgroup (kubepods) is at the root of the hierarchy
}
