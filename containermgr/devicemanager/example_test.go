package devicemanager_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/containermgr/devicemanager/deviceplugin"
)

func widgetPod(uid string, n int64) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"example.com/widget": *resource.NewQuantity(n, resource.DecimalSI)}}}}}}
	p.Name, p.Namespace, p.UID = uid, "default", types.UID(uid)
	return p
}

func Example() {
	dir, _ := os.MkdirTemp("", "dm")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	mgr, err := devicemanager.New(devicemanager.Config{PluginDir: dir})
	if err != nil {
		panic(err)
	}
	if err := mgr.Start(ctx, nil, nil); err != nil {
		panic(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Run(ctx) }()
	<-mgr.Ready()

	// A plugin with three widgets registers on the manager's kubelet.sock.
	plugin, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: "example.com/widget",
		PluginDir:    dir,
		Devices: []*pluginapi.Device{
			{ID: "w0", Health: pluginapi.Healthy}, {ID: "w1", Health: pluginapi.Healthy}, {ID: "w2", Health: pluginapi.Healthy},
		},
		Allocate: func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"WIDGETS": strings.Join(ids, ",")}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = plugin.Run(ctx) }()
	for {
		changed := mgr.Changed()
		if _, healthy := mgr.DeviceCapacity(); healthy.Name("example.com/widget", resource.DecimalSI).Value() == 3 {
			break
		}
		<-changed
	}
	capacity, allocatable := mgr.DeviceCapacity()
	fmt.Println("capacity:", capacity.Name("example.com/widget", resource.DecimalSI), "allocatable:", allocatable.Name("example.com/widget", resource.DecimalSI))

	first := widgetPod("first", 2)
	ok, _, _ := mgr.Admit(first, nil)
	fmt.Println("first admitted:", ok, mgr.ContainerDevices("first", "main"))
	cfg := &runtimeapi.ContainerConfig{}
	if err := mgr.ApplyContainerDevices(ctx, first, &first.Spec.Containers[0], cfg); err != nil {
		panic(err)
	}
	fmt.Printf("env: %s=%s\n", cfg.Envs[0].Key, cfg.Envs[0].Value)

	ok, reason, msg := mgr.Admit(widgetPod("second", 2), []*v1.Pod{first})
	fmt.Println("second admitted:", ok, reason)
	fmt.Println(msg)
	// Output:
	// capacity: 3 allocatable: 3
	// first admitted: true map[example.com/widget:[w0 w1]]
	// env: WIDGETS=w0,w1
	// second admitted: false UnexpectedAdmissionError
	// Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1, which is unexpected
}
