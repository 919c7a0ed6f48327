package devicemanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registryWatcher follows Config.RegistryDir, the plugin watcher's
// directory (pluginregistration v1): a socket created there is asked
// GetInfo; a device plugin (type DevicePlugin, version v1beta1) is then
// registered with its name as the resource and its endpoint (the socket
// itself when it names none) as the device plugin socket, and told the
// outcome with NotifyRegistrationStatus. A socket removed is a plugin
// gone: its devices turn unhealthy and the grace period starts.
type registryWatcher struct {
	m *Manager
	w *fsnotify.Watcher
	// known: registration socket -> (resource, endpoint).
	known map[string][2]string
	// pending: sockets whose GetInfo failed (the plugin may not listen
	// yet), tried again every second while they exist.
	pending map[string]bool
}

func newRegistryWatcher(m *Manager) (*registryWatcher, error) {
	dir := m.cfg.RegistryDir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("devicemanager: plugin registry directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("devicemanager: watch %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("devicemanager: watch %s: %w", dir, err)
	}
	return &registryWatcher{m: m, w: w, known: map[string][2]string{}, pending: map[string]bool{}}, nil
}

func (r *registryWatcher) run(ctx context.Context) {
	defer r.w.Close()
	if entries, err := os.ReadDir(r.m.cfg.RegistryDir); err == nil {
		for _, e := range entries {
			r.added(ctx, filepath.Join(r.m.cfg.RegistryDir, e.Name()))
		}
	}
	retry := r.m.cfg.Clock.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C():
			for sock := range r.pending {
				delete(r.pending, sock)
				r.added(ctx, sock)
			}
		case ev, ok := <-r.w.Events:
			if !ok {
				return
			}
			switch {
			case ev.Has(fsnotify.Create):
				r.added(ctx, ev.Name)
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				delete(r.pending, ev.Name)
				r.removed(ev.Name)
			}
		case err, ok := <-r.w.Errors:
			if !ok {
				return
			}
			r.m.cfg.Logger.Warn("watching the plugin registry", zap.Error(err))
		}
	}
}

// added registers the plugin behind a new registration socket.
func (r *registryWatcher) added(ctx context.Context, sock string) {
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || strings.HasPrefix(filepath.Base(sock), ".") {
		return
	}
	log := r.m.cfg.Logger.With(zap.String("socket", sock))
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Warn("plugin registry: dial", zap.Error(err))
		return
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ictx, icancel := context.WithTimeout(ctx, time.Second)
	info, err := client.GetInfo(ictx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	icancel()
	if err != nil {
		log.Info("plugin registry: GetInfo failed; will retry", zap.Error(err))
		r.pending[sock] = true
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.m.cfg.CallTimeout)
	defer cancel()
	if info.GetType() != registerapi.DevicePlugin {
		// Another kind of plugin (CSI, DRA): not ours to answer.
		log.Debug("plugin registry: not a device plugin", zap.String("type", info.GetType()))
		return
	}
	endpoint := info.GetEndpoint()
	if endpoint == "" {
		endpoint = sock
	}
	err = checkRegistryPlugin(info.GetName(), endpoint, info.GetSupportedVersions())
	if err == nil {
		err = r.m.RegisterPlugin(ctx, info.GetName(), endpoint)
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: err == nil}
	if err != nil {
		status.Error = "RegisterPlugin error -- " + err.Error()
		log.Warn("plugin registry: device plugin refused", zap.String("resource", info.GetName()), zap.Error(err))
	} else {
		r.known[sock] = [2]string{info.GetName(), endpoint}
	}
	if _, nerr := client.NotifyRegistrationStatus(cctx, status); nerr != nil {
		log.Warn("plugin registry: NotifyRegistrationStatus failed", zap.Error(nerr))
	}
}

func checkRegistryPlugin(res, endpoint string, versions []string) error {
	if !slices.Contains(versions, pluginapi.Version) {
		return fmt.Errorf("%w: %v (supported: %v)", ErrUnsupportedVersion, versions, pluginapi.SupportedVersions)
	}
	if !filepath.IsAbs(endpoint) {
		return fmt.Errorf("%w: endpoint %q must be an absolute path", ErrInvalidRegistration, endpoint)
	}
	return nil
}

// removed: the plugin's registration socket is gone.
func (r *registryWatcher) removed(sock string) {
	k, ok := r.known[sock]
	if !ok {
		return
	}
	delete(r.known, sock)
	r.m.pluginGone(k[0], k[1])
}

// pluginGone closes the endpoint of res when it is still the one at
// socket; its stream then ends and its devices turn unhealthy.
func (m *Manager) pluginGone(res, socket string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.resources[res]; r != nil && r.ep != nil && r.ep.socket == socket {
		m.cfg.Logger.Info("device plugin deregistered", zap.String("resource", res))
		r.ep.close()
	}
}
