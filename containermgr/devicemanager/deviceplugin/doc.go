// Package deviceplugin is a small device plugin server, the plugin side of
// the k8s.io/kubelet deviceplugin v1beta1 API: it serves ListAndWatch,
// GetDevicePluginOptions, GetPreferredAllocation, Allocate and
// PreStartContainer on its socket in the agent's device plugin directory,
// registers with the agent's kubelet.sock, registers again whenever that
// socket is created anew (the agent restarted) and retries while the agent
// is not there. Health changes (SetHealth, SetDevices) reach the agent at
// once. It works with devicemanager and with the kubelet alike;
// examples/deviceplugin is a runnable plugin built on it.
//
//	p, err := deviceplugin.New(deviceplugin.Config{
//		ResourceName: "example.com/widget",
//		PluginDir:    "/var/lib/kubelet/device-plugins",
//		Devices:      []*pluginapi.Device{{ID: "w0", Health: pluginapi.Healthy}},
//		Allocate: func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
//			return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"WIDGETS": strings.Join(ids, ",")}}, nil
//		},
//	})
//	err = p.Run(ctx)
package deviceplugin
