package devicemanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// watcherPlugin answers the plugin watcher's GetInfo on the same socket as
// its device plugin service, and reports NotifyRegistrationStatus.
type watcherPlugin struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
}

func (w *watcherPlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return w.info, nil
}

func (w *watcherPlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	w.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

func serveWatcherPlugin(t *testing.T, sock string, info *registerapi.PluginInfo, n int) *watcherPlugin {
	t.Helper()
	dp := &fakePlugin{resource: info.Name, socket: sock, opts: &pluginapi.DevicePluginOptions{}, devs: devices(n, pluginapi.Healthy),
		watchers: map[chan []*pluginapi.Device]bool{}}
	wp := &watcherPlugin{info: info, status: make(chan *registerapi.RegistrationStatus, 4)}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, dp)
	registerapi.RegisterRegistrationServer(srv, wp)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return wp
}

func nextStatus(t *testing.T, wp *watcherPlugin) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-wp.status:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no NotifyRegistrationStatus")
		return nil
	}
}

// TestPluginWatcherRegistration: a device plugin that appears in the
// registry directory is registered through GetInfo (its own socket as
// the endpoint), told so, and its devices counted; one with an
// unsupported version is told why it was refused; removing the socket
// makes the devices unhealthy.
func TestPluginWatcherRegistration(t *testing.T) {
	dir := shortDir(t)
	reg := filepath.Join(dir, "reg")
	mgr, err := New(Config{PluginDir: filepath.Join(dir, "dp"), RegistryDir: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	m := run(t, mgr)

	bad := serveWatcherPlugin(t, filepath.Join(reg, "old.sock"), &registerapi.PluginInfo{
		Type: registerapi.DevicePlugin, Name: "example.com/old", SupportedVersions: []string{"v1alpha1"},
	}, 1)
	if s := nextStatus(t, bad); s.PluginRegistered || !strings.Contains(s.Error, "unsupported device plugin API version") {
		t.Fatalf("old plugin status %+v, want refused for its version", s)
	}

	sock := filepath.Join(reg, "w.sock")
	good := serveWatcherPlugin(t, sock, &registerapi.PluginInfo{
		Type: registerapi.DevicePlugin, Name: widget, SupportedVersions: []string{"v1beta1"},
	}, 2)
	if s := nextStatus(t, good); !s.PluginRegistered || s.Error != "" {
		t.Fatalf("status %+v, want registered", s)
	}
	waitFor(t, m.Manager, "2 widgets through the plugin watcher", hasCounts(m.Manager, widget, 2, 2))
	if _, _, ok := m.Devices("example.com/old"); ok {
		t.Fatal("the refused plugin's resource is known")
	}

	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Manager, "deregistered: unhealthy", hasCounts(m.Manager, widget, 2, 0))
}
