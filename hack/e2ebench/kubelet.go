package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real kubelet (-kubelet PATH, built by hack/kubelet.sh) runs the same
// manifests-to-running workload as nodekit: standalone (no API server, no
// kubeconfig), its static pod directory the one the manifests are renamed
// into, every directory of its own in the run's work directory, on the same
// private containerd.
//
// What it would otherwise leave on the host, and how each run cleans it up:
//   - pod cgroups: its cgroupRoot is kubeletCgroupRoot, a cgroup this program
//     makes in every v1 hierarchy before the kubelet starts and removes (the
//     whole subtree, leaves first) after it stopped, so the kubelet's
//     kubepods/{burstable,besteffort}/pod<uid> never outlive a run and never
//     mix with anybody's /kubepods;
//   - kernel tunables: its container manager sets vm.overcommit_memory,
//     vm.panic_on_oom, kernel.panic and kernel.panic_on_oops to its liking
//     (protectKernelDefaults false); they are read before it starts and
//     written back after it stopped;
//   - /var/log/containers (a fixed path in the kubelet): the symlinks into
//     this run's pod log directory are removed;
//   - mounts under the work directory (none expected: the pods have no
//     volumes) are detached before it is removed;
//   - its pods: the manifests are removed and the pods seen stopped, then
//     everything in the namespace is removed through the CRI (removeAll).

// kubeletCgroupRoot is the kubelet's cgroupRoot (a cgroup of its own, not /).
const kubeletCgroupRoot = "/nodekit-e2ebench-kubelet"

// kubeletNodeName is the kubelet's --hostname-override: its static pods are
// named <manifest name>-<node name>.
const kubeletNodeName = "e2ebench-kubelet"

// cgroupFS is where the v1 hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

// varLogContainers is where the kubelet links every container's log (a
// constant in the kubelet, not configurable).
const varLogContainers = "/var/log/containers"

// kubeletTunables are the sysctls the kubelet's container manager sets
// (kernel tunables it "protects"); saved and restored around each run.
var kubeletTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// kubeletParams is what the kubelet's configuration file says.
type kubeletParams struct {
	Endpoint        string // CRI endpoint, unix:///path
	StaticPodPath   string
	PodLogsDir      string
	VolumePluginDir string
	CgroupRoot      string
	CgroupsPerQOS   bool
}

// kubeletConfig renders a KubeletConfiguration for a standalone kubelet on
// this machine: cgroupfs driver, cgroup v1 allowed (failCgroupV1: false;
// the kubelet refuses v1 otherwise since 1.35), no swap check, no HTTP
// servers (enableServer false, read-only and healthz ports 0; anonymous
// auth and AlwaysAllow should they be turned on), no image GC (its
// threshold at 100%: the runtime's few local images have no registry to
// come back from), oomScoreAdj 0 (lowering it is not permitted here).
func kubeletConfig(p kubeletParams) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("apiVersion: kubelet.config.k8s.io/v1beta1")
	w("kind: KubeletConfiguration")
	w("containerRuntimeEndpoint: %q", p.Endpoint)
	w("staticPodPath: %q", p.StaticPodPath)
	w("podLogsDir: %q", p.PodLogsDir)
	w("volumePluginDir: %q", p.VolumePluginDir)
	w("cgroupDriver: cgroupfs")
	w("cgroupRoot: %q", p.CgroupRoot)
	w("cgroupsPerQOS: %t", p.CgroupsPerQOS)
	if !p.CgroupsPerQOS {
		// Node allocatable is enforced on the pods' QoS cgroups only.
		w("enforceNodeAllocatable: []")
	}
	w("failCgroupV1: false")
	w("failSwapOn: false")
	w("enableServer: false")
	w("readOnlyPort: 0")
	w("healthzPort: 0")
	w("address: 127.0.0.1")
	w("authentication:")
	w("  anonymous:")
	w("    enabled: true")
	w("  webhook:")
	w("    enabled: false")
	w("authorization:")
	w("  mode: AlwaysAllow")
	w("oomScoreAdj: 0")
	w("imageGCHighThresholdPercent: 100")
	w("imageGCLowThresholdPercent: 99")
	w("resolvConf: /etc/resolv.conf")
	return b.String()
}

// kubeletArgs are the kubelet's command-line flags (the ones with no
// configuration-file field) for a work directory.
func kubeletArgs(work string, extra []string) []string {
	return append([]string{
		"--config", filepath.Join(work, "kubelet.yaml"),
		"--root-dir", filepath.Join(work, "root"),
		"--cert-dir", filepath.Join(work, "pki"),
		"--hostname-override", kubeletNodeName,
	}, extra...)
}

// endpointURL makes a CRI endpoint a unix:// URL.
func endpointURL(ep string) string {
	if strings.HasPrefix(ep, "/") {
		return "unix://" + ep
	}
	return ep
}

// kubeletProc is a running kubelet and what it changed on the host.
type kubeletProc struct {
	*agentProc
	work       string
	podLogs    string
	tunables   map[string]string
	cgroupRoot string
}

// startKubelet starts the kubelet on an empty static pod directory and
// returns once its main sync loop started and, with QoS cgroups, its
// container manager made them (the runtime-dependent modules are up), then
// o.kubeletSettle more: its start-up work is not billed to the pods.
func startKubelet(ctx context.Context, o options, bin, work string) (*kubeletProc, error) {
	k := &kubeletProc{
		agentProc: &agentProc{
			name:      "kubelet",
			logPath:   filepath.Join(work, "kubelet.log"),
			manifests: filepath.Join(work, "manifests"),
			exited:    make(chan error, 1),
			anyExit:   true,
		},
		work:       work,
		podLogs:    filepath.Join(work, "pods"),
		cgroupRoot: kubeletCgroupRoot,
	}
	for _, d := range []string{k.manifests, k.podLogs, filepath.Join(work, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cfg := kubeletConfig(kubeletParams{
		Endpoint:        endpointURL(o.endpoint),
		StaticPodPath:   k.manifests,
		PodLogsDir:      k.podLogs,
		VolumePluginDir: filepath.Join(work, "volume-plugins"),
		CgroupRoot:      k.cgroupRoot,
		CgroupsPerQOS:   o.kubeletQoS,
	})
	if err := os.WriteFile(filepath.Join(work, "kubelet.yaml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	var err error
	if k.tunables, err = readSysctls(kubeletTunables); err != nil {
		return nil, err
	}
	// A root left by an earlier run that died goes first.
	if err := removeCgroupTree(cgroupFS, k.cgroupRoot); err != nil {
		return nil, err
	}
	if err := makeCgroup(cgroupFS, k.cgroupRoot); err != nil {
		return nil, err
	}
	logFile, err := os.Create(k.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	k.cmd = exec.Command(bin, kubeletArgs(work, o.kubeletFlags)...)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	if err := k.cmd.Start(); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	go func() { k.exited <- k.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	qos := filepath.Join(cgroupFS, "memory", k.cgroupRoot, "kubepods")
	for {
		logData, _ := os.ReadFile(k.logPath)
		started := strings.Contains(string(logData), "Starting kubelet main sync loop")
		if started && o.kubeletQoS {
			_, err := os.Stat(qos)
			started = err == nil
		}
		if started {
			break
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), k.cleanup())
		case err := <-k.exited:
			k.exited <- err
			return nil, errors.Join(k.fail(fmt.Errorf("kubelet exited while starting: %v", err)), k.cleanup())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(k.fail(errors.New("kubelet's sync loop not started after 60s")), k.cleanup())
		}
	}
	if err := pause(ctx, o.kubeletSettle); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	if err := k.alive(); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	return k, nil
}

// cleanup kills the kubelet if it still runs and undoes what it left on
// the host: the caller removes its pods through the CRI first (a pod's
// cgroup goes only once its processes did).
func (k *kubeletProc) cleanup() error {
	if k.cmd != nil && k.cmd.Process != nil {
		k.kill()
	}
	var errs []error
	if err := writeSysctls(k.tunables); err != nil {
		errs = append(errs, err)
	}
	if err := removeLogLinks(varLogContainers, k.podLogs); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(k.work); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeCgroups removes the kubelet's cgroup root once its pods are gone.
// containerd removes a sandbox's cgroup when the sandbox is removed; a
// cgroup whose tasks have not quite gone yet is retried for a few seconds.
func (k *kubeletProc) removeCgroups(ctx context.Context) error {
	var err error
	for range 50 {
		if err = removeCgroupTree(cgroupFS, k.cgroupRoot); err == nil {
			return nil
		}
		if perr := pause(ctx, 100*time.Millisecond); perr != nil {
			return errors.Join(err, perr)
		}
	}
	return err
}

// runKubelet is one manifests-to-running measurement of the kubelet.
func runKubelet(ctx context.Context, o options, c *cri, bin string, n int, work string) (agentRun, error) {
	k, err := startKubelet(ctx, o, bin, work)
	if err != nil {
		return agentRun{}, err
	}
	m, err := measureAgent(ctx, o, c, k.agentProc, fmt.Sprintf("kl%d", n), n)
	if err == nil {
		err = k.stop()
	}
	// The kubelet is down: its pods go through the CRI, then its cgroups.
	err = errors.Join(err, k.cleanup(), c.removeAll(ctx), k.removeCgroups(ctx))
	return m, err
}

// hierarchies lists the cgroup hierarchies under root (each a directory
// with a cgroup.procs file). cgroup2's "unified" is listed only with
// unified: on this hybrid host it holds no controller the kubelet uses, so
// its root is not made there, but runc mirrors the pods' cgroups into it
// and they are removed from there too.
func hierarchies(root string, unified bool) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || (e.Name() == "unified" && !unified) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), "cgroup.procs")); err == nil {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// makeCgroup makes cgroup name in every v1 hierarchy. In cpuset's, it
// copies cpus and mems from the top (a new cpuset cgroup has none, and no
// task can join it then).
func makeCgroup(root, name string) error {
	hs, err := hierarchies(root, false)
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				continue
			}
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// removeCgroupTree removes cgroup name and every cgroup under it, in every
// hierarchy (cgroup2's too), leaves first (rmdir: a cgroup with tasks
// stays, and is reported).
func removeCgroupTree(root, name string) error {
	hs, err := hierarchies(root, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		top := filepath.Join(h, name)
		var dirs []string
		err := filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Deepest first: a walk lists a parent before its children.
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// readSysctls reads /proc/sys/<key> for each key.
func readSysctls(keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(v))
	}
	return out, nil
}

// writeSysctls writes back the values readSysctls read, where they changed.
func writeSysctls(vals map[string]string) error {
	var errs []error
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := filepath.Join("/proc/sys", k)
		cur, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(cur)) == vals[k] {
			continue
		}
		if err := os.WriteFile(p, []byte(vals[k]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, vals[k], err))
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the symlinks in dir that point into target.
func removeLogLinks(dir, target string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		dst, err := os.Readlink(p)
		if err != nil {
			continue
		}
		if strings.HasPrefix(dst, target+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder returns the mount points of a mountinfo listing at or under
// dir, deepest first (octal escapes such as \040 decoded).
func mountsUnder(mountinfo, dir string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeOctal(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or under dir.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mountsUnder(string(data), dir) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}
