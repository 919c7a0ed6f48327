package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerLogPath is <container>/<restartCount>.log, relative to the
// sandbox's log directory (CRI joins the two).
func containerLogPath(name string, restartCount int) string {
	return filepath.Join(name, strconv.Itoa(restartCount)+".log")
}

// restartCountFromLogs is one more than the highest <n> of the
// container's <n>.log files (rotated ones too), 0 when there are none.
func (m *Manager) restartCountFromLogs(pod *v1.Pod, container string) int {
	if checkPodIdentity(pod) != nil {
		return 0
	}
	entries, err := os.ReadDir(filepath.Join(podLogDir(m.cfg.PodLogsRoot, pod), container))
	if err != nil {
		return 0
	}
	next := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		num, rest, _ := strings.Cut(e.Name(), ".")
		if !strings.HasPrefix(rest, "log") || (rest != "log" && !strings.HasPrefix(rest, "log.")) {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n >= int(^uint32(0)>>1) {
			continue
		}
		next = max(next, n+1)
	}
	return next
}

// memoryCapacity is the memory size used for Burstable oom_score_adj:
// configBuilder.machineMemory, else Config.NodeAllocatable's memory, else
// defaultMachineMemory.
func (b *configBuilder) memoryCapacity() int64 {
	if b.machineMemory > 0 {
		return b.machineMemory
	}
	if b.cfg.NodeAllocatable != nil {
		if m, ok := b.cfg.NodeAllocatable()[v1.ResourceMemory]; ok && m.Value() > 0 {
			return m.Value()
		}
	}
	return defaultMachineMemory
}

func configErr(c string, format string, args ...any) error {
	return fmt.Errorf("%w: container %q: %s", ErrCreateContainerConfig, c, fmt.Sprintf(format, args...))
}

func (b *configBuilder) buildContainerConfig(ctx context.Context, in containerInput) (*runtimeapi.ContainerConfig, error) {
	if in.Container == nil {
		return nil, fmt.Errorf("%w: nil container", ErrCreateContainerConfig)
	}
	c := in.Container
	if err := checkPodIdentity(in.Pod); err != nil {
		return nil, fmt.Errorf("%w: container %q: %w", ErrCreateContainerConfig, c.Name, err)
	}
	pod := in.Pod
	if c.Name == "" || len(c.Name) > 253 || filepath.Base(c.Name) != c.Name || c.Name == "." || c.Name == ".." {
		return nil, configErr(c.Name, "name is not a single path segment")
	}
	if in.RestartCount < 0 || int64(in.RestartCount) > int64(^uint32(0)) {
		return nil, configErr(c.Name, "restart count %d out of range", in.RestartCount)
	}
	if err := verifyRunAsNonRoot(pod, c, nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCreateContainerConfig, err)
	}

	env, err := b.containerEnv(ctx, in)
	if err != nil {
		return nil, configErr(c.Name, "%v", err)
	}

	var command, args []string
	for _, s := range c.Command {
		command = append(command, expandVars(s, env.lookup))
	}
	for _, s := range c.Args {
		args = append(args, expandVars(s, env.lookup))
	}

	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.RestartCount)},
		Image:    &runtimeapi.ImageSpec{Image: in.ImageRef, UserSpecifiedImage: c.Image},
		Command:  command,
		Args:     args,
		// WorkingDir is passed as written (the kubelet does not expand it).
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(pod, c.Name, in.ContainerType),
		Annotations: containerAnnotations(pod, c, in.Hash, in.RestartCount),
		LogPath:     containerLogPath(c.Name, in.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	cfg.Envs = make([]*runtimeapi.KeyValue, 0, len(env.names))
	for _, n := range env.names {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: n, Value: []byte(env.values[n])})
	}

	if b.cfg.Mounts != nil {
		mounts, err := b.cfg.Mounts.ContainerMounts(ctx, pod, c)
		if err != nil {
			return nil, configErr(c.Name, "mounts: %v", err)
		}
		cfg.Mounts = mounts
	}
	tm, err := b.terminationMessageMount(pod, c, cfg.Mounts)
	if err != nil {
		return nil, configErr(c.Name, "%v", err)
	}
	if tm != nil {
		cfg.Mounts = append(cfg.Mounts, tm)
	}

	sc, err := b.containerSecurityContext(pod, c)
	if err != nil {
		return nil, configErr(c.Name, "%v", err)
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{
		Resources:       containerLinuxResources(pod, c, b.memoryCapacity()),
		SecurityContext: sc,
	}
	if b.cfg.CPUSets != nil {
		if cpus, ok := b.cfg.CPUSets.ContainerCPUSet(pod, c); ok {
			cfg.Linux.Resources.CpusetCpus = cpus
		}
	}
	if b.cfg.Devices != nil {
		if err := b.cfg.Devices.ApplyContainerDevices(ctx, pod, c, cfg); err != nil {
			return nil, configErr(c.Name, "devices: %v", err)
		}
	}
	return cfg, nil
}
