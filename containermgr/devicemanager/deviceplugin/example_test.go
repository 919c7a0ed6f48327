package deviceplugin_test

import (
	"context"
	"fmt"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/devicemanager/deviceplugin"
)

func Example() {
	p, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: "example.com/widget",
		PluginDir:    "/var/lib/kubelet/device-plugins",
		Devices:      []*pluginapi.Device{{ID: "w0"}, {ID: "w1"}},
		Allocate: func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"WIDGETS": strings.Join(ids, ",")}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("socket:", p.SocketPath())
	_ = p.SetHealth("w1", false) // e.g. a health check failed
	for _, d := range p.Devices() {
		fmt.Println(d.ID, d.Health)
	}
	resp, _ := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"w0"}}},
	})
	fmt.Println(resp.ContainerResponses[0].Envs)
	// Output:
	// socket: /var/lib/kubelet/device-plugins/example.com_widget.sock
	// w0 Healthy
	// w1 Unhealthy
	// map[WIDGETS:w0]
}
