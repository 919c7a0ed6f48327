// Command deviceplugin is a small device plugin, usable as a template: it
// serves N "widgets" of an extended resource (default example.com/widget)
// to a nodekit agent (or a kubelet) through the device plugin API.
//
// Each widget is a host file <state-dir>/<id> holding "widget <id>". A
// container given widgets gets each one mounted read-only at
// /widgets/<id>, the env WIDGET_IDS=<id>,<id> and, with --device-node
// (default /dev/null), that character device as /dev/widget-<id>. The file
// <state-dir>/unhealthy lists widget IDs (one per line) that are
// unhealthy: it is read every --health-period and on SIGHUP, and the agent
// sees the change at once (its allocatable drops).
//
//	go run ./examples/deviceplugin --plugin-dir /var/lib/nodekit/device-plugins --count 3
//	echo w1 > /var/lib/nodekit-widgets/unhealthy   # w1 is now unhealthy
//
// The plugin registers on <plugin-dir>/kubelet.sock, waits for the agent
// when it is not there yet, and registers again whenever the agent
// restarts. SIGINT or SIGTERM stop it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/devicemanager/deviceplugin"
	"github.com/nodekit/nodekit/examples/internal/exlog"
)

// config is what the flags set.
type config struct {
	PluginDir    string
	StateDir     string
	Resource     string
	Count        int
	HealthPeriod time.Duration
	// DeviceNode is a host device node each widget exposes as
	// /dev/widget-<id>; "" = none.
	DeviceNode string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.PluginDir, "plugin-dir", "/var/lib/kubelet/device-plugins", "the agent's device plugin directory (holds kubelet.sock)")
	flag.StringVar(&cfg.StateDir, "state-dir", "/var/lib/nodekit-widgets", "where the widgets' host files and the unhealthy list live")
	flag.StringVar(&cfg.Resource, "resource", "example.com/widget", "the extended resource served")
	flag.IntVar(&cfg.Count, "count", 3, "how many widgets (w0, w1, ...)")
	flag.DurationVar(&cfg.HealthPeriod, "health-period", time.Second, "how often the unhealthy list is read")
	flag.StringVar(&cfg.DeviceNode, "device-node", "/dev/null", "host device node each widget exposes as /dev/widget-<id> (\"\": none)")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()
	log := exlog.New(*verbose)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := run(ctx, cfg, hup, log); err != nil {
		fmt.Fprintln(os.Stderr, "deviceplugin:", err)
		os.Exit(1)
	}
}

// run serves the widgets until ctx ends. A value on reread makes it read
// the unhealthy list at once.
func run(ctx context.Context, cfg config, reread <-chan os.Signal, log *zap.Logger) error {
	if cfg.Count < 1 || cfg.Count > 1000 {
		return fmt.Errorf("--count %d: want 1 to 1000", cfg.Count)
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return fmt.Errorf("--state-dir %q must be an absolute path", cfg.StateDir)
	}
	if cfg.HealthPeriod <= 0 {
		return fmt.Errorf("--health-period must be positive")
	}
	if cfg.DeviceNode != "" {
		if fi, err := os.Stat(cfg.DeviceNode); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("--device-node %q must be a character device", cfg.DeviceNode)
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return err
	}
	var devs []*pluginapi.Device
	for i := range cfg.Count {
		id := fmt.Sprintf("w%d", i)
		if err := os.WriteFile(filepath.Join(cfg.StateDir, id), []byte("widget "+id+"\n"), 0o644); err != nil {
			return err
		}
		devs = append(devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	p, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: cfg.Resource,
		PluginDir:    cfg.PluginDir,
		Devices:      devs,
		Allocate: func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			return allocate(cfg.StateDir, cfg.DeviceNode, ids)
		},
		Logger: log,
	})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	log.Info("serving widgets", zap.String("resource", cfg.Resource), zap.Int("count", cfg.Count), zap.String("socket", p.SocketPath()))
	tick := time.NewTicker(cfg.HealthPeriod)
	defer tick.Stop()
	for {
		updateHealth(p, cfg.StateDir, log)
		select {
		case err := <-done:
			return err
		case <-tick.C:
		case <-reread:
		}
	}
}

// allocate mounts each widget's host file, names them in an env and maps
// the device node.
func allocate(stateDir, deviceNode string, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	resp := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"WIDGET_IDS": strings.Join(ids, ",")},
		Annotations: map[string]string{"example.com/widget-ids": strings.Join(ids, ",")},
	}
	for _, id := range ids {
		host := filepath.Join(stateDir, id)
		if _, err := os.Stat(host); err != nil {
			return nil, fmt.Errorf("widget %s: %w", id, err)
		}
		resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/widgets/" + id, HostPath: host, ReadOnly: true})
		if deviceNode != "" {
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/widget-" + id, HostPath: deviceNode, Permissions: "rw"})
		}
	}
	return resp, nil
}

// updateHealth applies <stateDir>/unhealthy to the plugin's devices.
func updateHealth(p *deviceplugin.Plugin, stateDir string, log *zap.Logger) {
	b, err := os.ReadFile(filepath.Join(stateDir, "unhealthy"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("reading the unhealthy list", zap.Error(err))
		return
	}
	var bad []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			bad = append(bad, id)
		}
	}
	for _, d := range p.Devices() {
		healthy := !slices.Contains(bad, d.ID)
		if healthy != (d.Health == pluginapi.Healthy) {
			log.Info("widget health changed", zap.String("id", d.ID), zap.Bool("healthy", healthy))
			_ = p.SetHealth(d.ID, healthy)
		}
	}
}
