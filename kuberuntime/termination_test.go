package kuberuntime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

// startOne runs pod on a fresh fake runtime through a Manager with PodsDir
// and PodLogsRoot in temp dirs; it returns both and the running container.
func startOne(t *testing.T, pod *v1.Pod) (*kuberuntime.Manager, *fake.Runtime, string, string) {
	t.Helper()
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	cri, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	pods, logs := t.TempDir(), t.TempDir()
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri, Clock: clk, PodsDir: pods, PodLogsRoot: logs})
	if err != nil {
		t.Fatal(err)
	}
	res := m.SyncPod(t.Context(), pod, nil, nil)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	cs, err := cri.ListContainers(t.Context(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers %v, %v", cs, err)
	}
	return m, cri, cs[0].Id, pods
}

func tmPod(policy v1.TerminationMessagePolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-tm", Name: "tm", Namespace: "default"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{
			Name: "app", Image: "busybox", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: policy,
		}}},
	}
}

// hostFile is the host side of the container's termination-message mount.
func hostFile(t *testing.T, cri *fake.Runtime, id string) string {
	t.Helper()
	st, err := cri.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.GetStatus().GetMounts() {
		if m.ContainerPath == "/dev/termination-log" {
			return m.HostPath
		}
	}
	t.Fatalf("no termination-message mount in %v", st.GetStatus().GetMounts())
	return ""
}

func exitedMessage(t *testing.T, m *kuberuntime.Manager) string {
	t.Helper()
	ps, err := m.GetPodStatus(t.Context(), "uid-tm", "tm", "default")
	if err != nil || len(ps.ContainerStatuses) != 1 {
		t.Fatalf("status %+v, %v", ps, err)
	}
	if ps.ContainerStatuses[0].State != kubetypes.ContainerStateExited {
		t.Fatalf("container state %s", ps.ContainerStatuses[0].State)
	}
	return ps.ContainerStatuses[0].Message
}

func TestTerminationMessageFile(t *testing.T) {
	m, cri, id, pods := startOne(t, tmPod(v1.TerminationMessageReadFile))
	host := hostFile(t, cri, id)
	if !strings.HasPrefix(host, filepath.Join(pods, "uid-tm", "containers", "app.")) {
		t.Errorf("termination file %s is not the container's in the pod's containers dir", host)
	}
	if st, err := os.Stat(host); err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("termination file: %v, %v", st, err)
	}
	// What the container wrote, capped at 4 KiB.
	if err := os.WriteFile(host, []byte("bye\n"+strings.Repeat("x", 5000)), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := cri.ExitContainer(id, 3, "Error"); err != nil {
		t.Fatal(err)
	}
	msg := exitedMessage(t, m)
	if !strings.HasPrefix(msg, "bye\n") || len(msg) != 4096 {
		t.Errorf("message %q (%d bytes), want the file's first 4096 bytes", msg[:min(len(msg), 20)], len(msg))
	}
}

func TestTerminationMessageFallbackToLogs(t *testing.T) {
	m, cri, id, _ := startOne(t, tmPod(v1.TerminationMessageFallbackToLogsOnError))
	st, err := cri.ContainerStatus(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	logPath := st.GetStatus().GetLogPath()
	if !filepath.IsAbs(logPath) {
		t.Skipf("the fake reports a relative log path %q", logPath)
	}
	var lines []string
	for i := range 100 {
		lines = append(lines, "2026-11-22T00:00:00.000000000Z stdout F line "+string(rune('a'+i%26)))
	}
	lines = append(lines, "2026-11-22T00:00:00.000000000Z stderr P par", "2026-11-22T00:00:00.000000000Z stderr F tial")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cri.ExitContainer(id, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	msg := exitedMessage(t, m)
	if !strings.HasSuffix(msg, "line v\npartial\n") || strings.Count(msg, "\n") != 80 {
		t.Errorf("message %q: want the last 80 log lines' content", msg)
	}
}

func TestTerminationMessageFallbackOnlyOnFailure(t *testing.T) {
	m, cri, id, _ := startOne(t, tmPod(v1.TerminationMessageFallbackToLogsOnError))
	if err := cri.ExitContainer(id, 0, "Completed"); err != nil {
		t.Fatal(err)
	}
	if msg := exitedMessage(t, m); msg != "" {
		t.Errorf("message %q for a successful exit with an empty file, want none", msg)
	}
}

func TestTerminationMessageNoPodsDir(t *testing.T) {
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	cri, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri, Clock: clk, PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncPod(t.Context(), tmPod(v1.TerminationMessageReadFile), nil, nil).Err(); err != nil {
		t.Fatal(err)
	}
	cs, _ := cri.ListContainers(t.Context(), &runtimeapi.ContainerFilter{})
	st, _ := cri.ContainerStatus(t.Context(), cs[0].Id, false)
	if n := len(st.GetStatus().GetMounts()); n != 0 {
		t.Errorf("%d mounts without PodsDir, want none", n)
	}
	if _, err := kuberuntime.New(kuberuntime.Config{Runtime: cri, Images: cri, PodsDir: "relative/pods"}); err == nil {
		t.Error("a relative PodsDir was accepted")
	}
}
