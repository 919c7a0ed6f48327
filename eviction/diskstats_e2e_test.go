//go:build e2e && linux

package eviction_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// TestE2ECgroupStatsDisk runs a busybox pod on the containerd named by
// NODEKIT_CRI_ENDPOINT that writes 8Mi into its writable layer, 2Mi into
// an emptyDir-like host directory and some log lines, and waits until
// CgroupStats (CRI stats, log and volume walks) reports all three for the
// pod and its container. containerd refreshes writable-layer sizes every
// stats_collect_period (10s in hack/containerd.sh), hence the deadline.
func TestE2ECgroupStatsDisk(t *testing.T) {
	ep := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if ep == "" {
		t.Skip("NODEKIT_CRI_ENDPOINT is not set: start containerd with hack/containerd.sh")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containers")
	}
	busybox := os.Getenv("NODEKIT_BUSYBOX_IMAGE")
	if busybox == "" {
		busybox = "localhost/nodekit/busybox:1"
	}
	ctx := t.Context()
	c, err := remote.New(remote.Config{Endpoint: ep, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect %s: %v", ep, err)
	}

	const (
		ns, name = "nodekit-e2e", "evdisk"
		uid      = "evdisk-e2e-0000-0000-000000000001"
	)
	logsRoot, podsDir := t.TempDir(), t.TempDir()
	podLogs := filepath.Join(logsRoot, ns+"_"+name+"_"+uid)
	scratch := filepath.Join(podsDir, uid, "volumes", "kubernetes.io~empty-dir", "scratch")
	for _, d := range []string{podLogs, scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{
		"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": ns,
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		LogDirectory: podLogs,
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.StopPodSandbox(ctx, sb); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if err := c.RemovePodSandbox(ctx, sb); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	ctrLabels := map[string]string{"io.kubernetes.container.name": "app"}
	for k, v := range labels {
		ctrLabels[k] = v
	}
	ctr, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: busybox},
		Command: []string{"sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=8 2>/dev/null; " +
			"dd if=/dev/zero of=/scratch/f bs=1M count=2 2>/dev/null; " +
			"i=0; while [ $i -lt 500 ]; do echo log line $i; i=$((i+1)); done; sync; exec sleep 3600"},
		LogPath: "app/0.log",
		Labels:  ctrLabels,
		Mounts:  []*runtimeapi.Mount{{ContainerPath: "/scratch", HostPath: scratch}},
	}, sbConfig)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, ctr); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	stats, err := eviction.NewCgroupStats(eviction.CgroupStatsConfig{
		ContainerStats: c, PodLogsRoot: logsRoot, PodsDir: podsDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	var last eviction.PodStats
	deadline := time.Now().Add(90 * time.Second)
	for {
		sum, err := stats.Summary(ctx)
		if err != nil {
			t.Fatalf("Summary: %v", err)
		}
		last = eviction.PodStats{}
		for _, p := range sum.Pods {
			if p.UID == uid {
				last = p
			}
		}
		if last.RootfsBytes >= 8<<20 && last.VolumeBytes >= 2<<20 && last.LogsBytes > 0 && len(last.Containers) == 1 {
			break
		}
		if time.Now().After(deadline) {
			raw, err := c.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: ctr})
			t.Fatalf("pod stats never showed 8Mi of rootfs, 2Mi of volume and logs: %+v (CRI stats %v, %v)", last, raw, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	raw, err := c.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: ctr})
	if err != nil || len(raw) != 1 {
		t.Fatalf("ListContainerStats(%s): %v, %v", ctr, raw, err)
	}
	wl := raw[0].GetWritableLayer()
	t.Logf("CRI writable layer: fsId %q usedBytes %d inodesUsed %d; working set %d; labels %v",
		wl.GetFsId().GetMountpoint(), wl.GetUsedBytes().GetValue(), wl.GetInodesUsed().GetValue(),
		raw[0].GetMemory().GetWorkingSetBytes().GetValue(), raw[0].GetAttributes().GetLabels())
	t.Logf("pod stats: %+v", last)
	app := last.Containers[0]
	if app.Name != "app" || app.RootfsBytes != last.RootfsBytes || app.LogsBytes == 0 || app.LogsBytes > last.LogsBytes {
		t.Errorf("container stats %+v (pod %+v)", app, last)
	}
	if last.RootfsInodes == 0 || last.VolumeInodes < 2 || last.LogsInodes < 3 {
		t.Errorf("inodes: rootfs %d volume %d logs %d", last.RootfsInodes, last.VolumeInodes, last.LogsInodes)
	}
	if last.MemoryWorkingSetBytes == 0 || app.MemoryWorkingSetBytes != last.MemoryWorkingSetBytes {
		t.Errorf("working set: pod %d container %d, want the container's (no pod cgroup)", last.MemoryWorkingSetBytes, app.MemoryWorkingSetBytes)
	}

	// An exited container's layer stays on disk until it is removed: it
	// still counts (containerd lists exited containers' stats).
	if err := c.StopContainer(ctx, ctr, 1); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	sum, err := stats.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var exited eviction.PodStats
	for _, p := range sum.Pods {
		if p.UID == uid {
			exited = p
		}
	}
	t.Logf("after the container exited: %+v", exited)
	if exited.RootfsBytes < 8<<20 {
		t.Errorf("exited container: rootfs %d, want its layer still counted", exited.RootfsBytes)
	}
	if !strings.Contains(wl.GetFsId().GetMountpoint(), "overlayfs") {
		t.Logf("writable layer file system %q is not the overlayfs snapshotter's", wl.GetFsId().GetMountpoint())
	}
}
