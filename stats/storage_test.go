package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Ephemeral storage is the writable layers, the log files and the
// emptyDir volumes; volumes are measured again only after
// VolumeStatsPeriod, and a pod that went is forgotten.
func TestSummaryEphemeralStorage(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	pods, logs := t.TempDir(), t.TempDir()
	vol := filepath.Join(pods, "uid-web", "volumes", emptyDirDir, "scratch")
	tree(t, vol, map[string]string{"data": string(make([]byte, 40<<10))})
	if err := os.MkdirAll(filepath.Join(pods, "uid-web", "volumes", emptyDirDir, "cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree(t, logs, map[string]string{"default_web_uid-web/app/0.log": "0123456789", "default_web_uid-web/app/1.log": "abc"})
	p := e.provider(Config{PodsDir: pods, PodLogsRoot: logs, NodeFsPath: pods, VolumeStatsPeriod: time.Minute})
	s := e.summary(p, false)
	web := s.pod(t, "web")
	if len(web.VolumeStats) != 2 || web.VolumeStats[0].Name != "cache" || web.VolumeStats[1].Name != "scratch" {
		t.Fatalf("volume stats %+v, want cache and scratch", web.VolumeStats)
	}
	scratch := web.VolumeStats[1]
	if val(scratch.UsedBytes).(uint64) < 40<<10 || val(scratch.InodesUsed) != uint64(2) || scratch.CapacityBytes == nil {
		t.Errorf("scratch %+v, want at least 40 KiB in 2 inodes and the node's capacity", scratch.FsStats)
	}
	app := container(t, web, "app")
	if app.Logs == nil || val(app.Logs.UsedBytes) != uint64(13) || val(app.Logs.InodesUsed) != uint64(3) {
		t.Errorf("app logs %+v, want 13 bytes in 2 files and their directory", app.Logs)
	}
	want := deref(app.Rootfs.UsedBytes) + 13 + deref(web.VolumeStats[0].UsedBytes) + deref(scratch.UsedBytes)
	if got := deref(web.EphemeralStorage.UsedBytes); got != want {
		t.Errorf("ephemeral storage %d, want rootfs + logs + volumes %d", got, want)
	}

	// Within the period the volumes are not walked again.
	tree(t, vol, map[string]string{"more": string(make([]byte, 80<<10))})
	e.clk.Step(30 * time.Second)
	if got := volume(t, e.summary(p, false), "scratch"); got != deref(scratch.UsedBytes) {
		t.Errorf("scratch measured again within the period: %d, was %d", got, deref(scratch.UsedBytes))
	}
	e.clk.Step(31 * time.Second)
	if got := volume(t, e.summary(p, false), "scratch"); got < deref(scratch.UsedBytes)+80<<10 {
		t.Errorf("scratch after the period %d, want the new 80 KiB counted", got)
	}
	// only_cpu_and_memory neither measures nor forgets volumes.
	e.summary(p, true)
	if len(p.vols.pods) != 1 {
		t.Errorf("%d pods in the volume cache, want 1", len(p.vols.pods))
	}
	sb, _ := e.rt.ListPodSandbox(e.ctx, nil)
	if err := e.rt.StopPodSandbox(e.ctx, sb[0].Id); err != nil {
		t.Fatal(err)
	}
	e.summary(p, false)
	if len(p.vols.pods) != 0 {
		t.Errorf("%d pods in the volume cache after the pod went, want 0", len(p.vols.pods))
	}
}

func volume(t *testing.T, s *summaryT, name string) uint64 {
	t.Helper()
	for _, v := range s.pod(t, "web").VolumeStats {
		if v.Name == name {
			return deref(v.UsedBytes)
		}
	}
	t.Fatalf("no volume %s", name)
	return 0
}

func TestNewRefusesNegativeVolumePeriod(t *testing.T) {
	e := newEnv(t)
	if _, err := New(Config{NodeName: "n", Runtime: e.rt, Pods: fakePods{e.rt}, VolumeStatsPeriod: -time.Second, PodsDir: "rel"}); err == nil {
		t.Error("New accepted a negative VolumeStatsPeriod and a relative PodsDir")
	}
}
