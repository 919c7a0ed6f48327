package soak

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/internal/procmem"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/volumemgr"
)

var (
	pods      = flag.Int("soak.pods", 0, "pods to churn through the agent (0: a short run of 400)")
	batch     = flag.Int("soak.batch", 20, "pods started and removed together")
	rssMargin = flag.Int("soak.rss-margin-mb", 0, "fail when the idle RSS after the churn is more than this many MB over the idle RSS after the warm-up (0: report only)")
	freshMax  = flag.Int("soak.fresh-margin-mb", 0, "fail when the idle RSS after the churn is more than this many MB over the fresh agent's, before its first pod (0: report only)")
	anonMax   = flag.Int("soak.fresh-anon-margin-mb", 0, "fail when the anonymous part of the idle RSS after the churn (RssAnon) is more than this many MB over the fresh agent's (0: report only)")
	slopeMax  = flag.Float64("soak.max-slope", 64, "fail when the heap after GC grows by more than this many bytes per pod after the warm-up")
	profile   = flag.String("soak.heap-profile", "", "write a heap profile here at the end (and FILE.fresh, FILE.running with the warm-up's last batch running, FILE.warm idle after it)")
	memRate   = flag.Int("soak.memprofilerate", -1, "runtime.MemProfileRate for the run (-1: 0, no heap profile sampling, unless -soak.heap-profile is given)")
	pagesOut  = flag.String("soak.pages", "", "write the addresses of the binary's file-backed pages resident after the churn but not in the fresh agent here (with -soak.detail)")
	detail    = flag.Bool("soak.detail", false, "log smaps_rollup and the Go runtime's memory classes at each RSS reading")
)

// chanSource sends every set it is given as the source's SET.
type chanSource struct {
	out  chan<- kubetypes.PodUpdate
	sets <-chan []*v1.Pod
}

func (s *chanSource) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.sets:
			select {
			case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: "soak"}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// heapAfterGC is the live heap once the garbage collector has run.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// memStat is the process's resident set after the runtime returned what
// it could to the OS: VmRSS, its anonymous part (RssAnon: the heap, stacks,
// runtime metadata and written data pages) and its file-backed part
// (RssFile: the binary's code and read-only data pages that have run or
// been read, clean pages the kernel can drop and read again).
type memStat struct{ rss, anon, file, threads uint64 }

func (m memStat) String() string {
	return fmt.Sprintf("RSS %.1f MB (anonymous %.1f MB, file %.1f MB)", mb(m.rss), mb(m.anon), mb(m.file))
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

func readMem(t *testing.T) memStat {
	debug.FreeOSMemory()
	st, err := procmem.ReadSelf()
	if err != nil {
		t.Fatal(err)
	}
	m := memStat{rss: st.RSS, anon: st.Anon, file: st.File, threads: st.Threads}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("go runtime: heap sys %d inuse %d released %d, stacks %d, mspan %d, gc %d, other %d, goroutines %d, threads %d",
		ms.HeapSys>>10, ms.HeapInuse>>10, ms.HeapReleased>>10, ms.StackSys>>10, ms.MSpanSys>>10, ms.GCSys>>10, ms.OtherSys>>10, runtime.NumGoroutine(), m.threads)
	if *detail {
		logDetail(t)
	}
	return m
}

// logDetail logs /proc/self/smaps_rollup and the Go runtime's memory
// classes (KiB): where the resident set is.
func logDetail(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		var parts []string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) == 3 && f[2] == "kB" && f[1] != "0" {
				parts = append(parts, strings.TrimSuffix(f[0], ":")+" "+f[1])
			}
		}
		t.Logf("smaps_rollup (KiB): %s", strings.Join(parts, ", "))
	}
	if b, err := os.ReadFile("/proc/self/smaps"); err == nil {
		// Each mapping with resident pages: its range, name, Rss and Anonymous.
		var head string
		var rss string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
				head = f[0] + " " + f[1]
				if len(f) >= 6 {
					head += " " + filepath.Base(f[5])
				}
			case len(f) == 3 && f[0] == "Rss:":
				rss = f[1]
			case len(f) == 3 && f[0] == "Anonymous:" && rss != "0":
				t.Logf("  map %s rss %s anon %s", head, rss, f[1])
			}
		}
	}
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || d.Name == "/gc/heap/objects:objects" || d.Name == "/gc/heap/live:bytes" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	var parts []string
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v := s.Value.Uint64()
			name := strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(s.Name, ":bytes"), ":objects"), "/memory/classes/")
			if strings.HasSuffix(s.Name, ":bytes") {
				parts = append(parts, fmt.Sprintf("%s %d", name, v>>10))
			} else {
				parts = append(parts, fmt.Sprintf("%s %d objects", name, v))
			}
		}
	}
	t.Logf("runtime/metrics (KiB): %s", strings.Join(parts, ", "))
}

// soakPod is the n-th pod: an init container, a main container with exec
// readiness and liveness probes and an emptyDir, and on every third pod a
// sidecar that crash-loops (back-off entries, Warning events, restarts).
func soakPod(n int) *v1.Pod {
	name := fmt.Sprintf("p%d", n)
	grace := int64(1)
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: "soak"}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Volumes:                       []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			InitContainers:                []v1.Container{{Name: "init", Image: "busybox:1", Command: []string{"true"}}},
			Containers: []v1.Container{{Name: "c", Image: "busybox:1", Command: []string{"sleep", "infinity"},
				ReadinessProbe: probe, LivenessProbe: probe,
				VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}},
		},
	}
	if n%3 == 0 {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "crash", Image: "busybox:1", Command: []string{"false"}})
	}
	return p
}

// residentPages returns the pages of the test binary's file mappings that
// are resident (/proc/self/pagemap's present bit), by address.
func residentPages(t *testing.T) map[uint64]bool {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	out := map[uint64]bool{}
	for _, l := range strings.Split(string(maps), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		z, _ := strconv.ParseUint(hi, 16, 64)
		buf := make([]byte, (z-a)/4096*8)
		if _, err := pm.ReadAt(buf, int64(a/4096*8)); err != nil {
			t.Fatal(err)
		}
		for i := range (z - a) / 4096 {
			if buf[i*8+7]&0x80 != 0 {
				out[a+i*4096] = true
			}
		}
	}
	return out
}

// peakHeap keeps the largest heap figures seen with a batch running.
type peakHeap struct{ live, goal, objects, inuse uint64 }

func (p *peakHeap) sample() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	p.live = max(p.live, s[0].Value.Uint64())
	p.goal = max(p.goal, s[1].Value.Uint64())
	p.objects = max(p.objects, s[2].Value.Uint64())
	p.inuse = max(p.inuse, s[2].Value.Uint64()+s[3].Value.Uint64())
}

func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// seriesWithPodLabels counts the gathered series that name a pod or a
// container: none may be left once every pod is gone.
func seriesWithPodLabels(t *testing.T, g prometheus.Gatherer) []string {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "pod", "pod_uid", "uid", "container", "container_id", "namespace":
					out = append(out, mf.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}")
				}
			}
		}
	}
	return out
}

// TestSoak churns pods through a whole agent on the fake runtime, in a
// synctest bubble (virtual time), with the prober, the volume manager,
// metrics and a per-pod event tracker wired: each batch is started,
// waited Running, removed and waited gone. It reports the heap after GC
// through the run and its slope per pod past the warm-up, and the idle RSS
// before and after. Run it as its own process, e.g.
//
//	go test ./hack/soak -run TestSoak -v -soak.pods=100000
//
// Once every pod is gone it also checks that nothing per pod is left:
// no sandbox or container in the runtime, no pod directory, no series
// with a pod label, no tracked warning, no pod in the PLEG cache.
func TestSoak(t *testing.T) {
	total := *pods
	if total == 0 {
		total = 400
	}
	b := *batch
	if b <= 0 || total%b != 0 {
		t.Fatalf("-soak.pods %d must be a positive multiple of -soak.batch %d", total, b)
	}
	warm := max(total/10, 10*b)
	// The examples' binaries link no heap profiler, so the linker turns
	// the runtime's heap profile sampling off in them; a test binary links
	// one (the testing package's -test.memprofile), and its sampling keeps
	// a stack record per sampled allocation site for good (1-2 MB over a
	// long run, and the code pages the stack walks touch). Measure the
	// agent as it runs in those binaries unless a heap profile is asked for.
	switch {
	case *memRate >= 0:
		runtime.MemProfileRate = *memRate
	case *profile == "":
		runtime.MemProfileRate = 0
	}
	wall := time.Now()
	defer func() { t.Logf("%d pods in %s of wall time", total, time.Since(wall).Round(time.Millisecond)) }()
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		reg := prometheus.NewRegistry()
		warnings, err := events.NewLastWarnings(events.LastWarningsConfig{})
		if err != nil {
			t.Fatal(err)
		}
		vm, err := volumemgr.New(volumemgr.Config{PodsDir: filepath.Join(root, "pods")})
		if err != nil {
			t.Fatal(err)
		}
		sets := make(chan []*v1.Pod)
		a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
			WithRootDir(root).WithLogger(zap.NewNop()).WithRegisterer(reg).
			WithEventRecorder(warnings).WithProber().WithVolumeManager(vm).
			WithPodSource("soak", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &chanSource{out: out, sets: sets}, nil
			}).Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		<-a.Ready()
		<-time.After(10 * time.Second)
		synctest.Wait()
		fresh := readMem(t)
		var freshPages map[uint64]bool
		if *pagesOut != "" {
			freshPages = residentPages(t)
		}
		if *profile != "" {
			writeHeapProfile(t, *profile+".fresh")
		}
		started := time.Now()

		type point struct{ pods, heap uint64 }
		var points []point
		var warmMem memStat
		var peak peakHeap
		for n := 0; n < total; n += b {
			set := make([]*v1.Pod, 0, b)
			for i := range b {
				set = append(set, soakPod(n+i))
			}
			sets <- set
			for _, p := range set {
				if _, _, err := a.WaitForPod(ctx, "default", p.Name, nodekit.PodRunning); err != nil {
					t.Fatal(err)
				}
			}
			if *detail {
				peak.sample()
			}
			if *profile != "" && n+b == warm {
				runtime.GC()
				writeHeapProfile(t, *profile+".running")
			}
			// Some probe periods and a crash-loop restart or two.
			<-time.After(3 * time.Second)
			sets <- nil
			for len(a.Pods()) > 0 {
				<-time.After(time.Second)
			}
			// Housekeeping (every 2 s) removes what is kept for a
			// terminated pod; container GC (every minute) removes
			// the dead containers and sandboxes.
			<-time.After(5 * time.Second)
			synctest.Wait()
			if done := n + b; done >= warm && (done-warm)%max(b, (total-warm)/10/b*b) == 0 {
				// Past a container GC period, so every sample is
				// taken with the dead containers collected.
				<-time.After(61 * time.Second)
				synctest.Wait()
				points = append(points, point{uint64(done), heapAfterGC()})
				t.Logf("heap after GC after %6d pods: %8d bytes (progress)", done, points[len(points)-1].heap)
				if done == warm {
					warmMem = readMem(t)
					if *profile != "" {
						writeHeapProfile(t, *profile+".warm")
					}
				}
			}
		}
		// Let container GC and housekeeping finish with the last batch.
		<-time.After(2 * time.Minute)
		synctest.Wait()
		end := heapAfterGC()
		after := readMem(t)
		if *profile != "" {
			writeHeapProfile(t, *profile)
		}
		if *pagesOut != "" {
			var b strings.Builder
			for a := range residentPages(t) {
				if !freshPages[a] {
					fmt.Fprintf(&b, "%x\n", a)
				}
			}
			if err := os.WriteFile(*pagesOut, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}

		// Least-squares slope of the heap against the pods churned.
		var sx, sy, sxx, sxy float64
		for _, p := range points {
			x, y := float64(p.pods), float64(p.heap)
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		k := float64(len(points))
		slope := (k*sxy - sx*sy) / (k*sxx - sx*sx)
		t.Logf("%d pods in %s of virtual time", total, time.Since(started).Round(time.Second))
		if *detail {
			t.Logf("with a batch running: live heap at most %d KiB, heap goal at most %d KiB, heap objects at most %d KiB, heap in use at most %d KiB",
				peak.live>>10, peak.goal>>10, peak.objects>>10, peak.inuse>>10)
		}
		t.Logf("heap after GC: %d bytes after %d pods (warm-up), %d after %d and 2 idle minutes; slope %.2f bytes/pod over %d points",
			points[0].heap, points[0].pods, end, total, slope, len(points))
		t.Logf("idle: %s fresh, %s after %d pods (warm-up), %s after %d pods: %+.1f MB over the fresh agent (anonymous %+.1f, file %+.1f), %+.1f MB over the warm one",
			fresh, warmMem, warm, after, total, mb(after.rss)-mb(fresh.rss), mb(after.anon)-mb(fresh.anon), mb(after.file)-mb(fresh.file), mb(after.rss)-mb(warmMem.rss))

		// Nothing per pod is left.
		sbs, err := a.FakeRuntime().ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := a.FakeRuntime().ListContainers(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 0 || len(cs) != 0 {
			t.Errorf("runtime keeps %d sandboxes and %d containers with no pods", len(sbs), len(cs))
		}
		if left, _ := os.ReadDir(filepath.Join(root, "pods")); len(left) != 0 {
			t.Errorf("%d pod directories left, e.g. %s", len(left), left[0].Name())
		}
		if s := seriesWithPodLabels(t, reg); len(s) != 0 {
			t.Errorf("%d series with pod labels left, e.g. %v", len(s), s[:min(3, len(s))])
		}
		if n := warnings.Len(); n != 0 {
			t.Errorf("the warning tracker keeps %d pods", n)
		}
		if n := a.PLEG().Cache().Len(); n != 0 {
			t.Errorf("the PLEG cache keeps %d pods", n)
		}
		if *slopeMax > 0 && slope > *slopeMax && total >= 2000 {
			t.Errorf("heap after GC grows by %.1f bytes per pod (more than %.0f): something kept per pod outlives it", slope, *slopeMax)
		}
		if *rssMargin > 0 && after.rss > warmMem.rss+uint64(*rssMargin)<<20 {
			t.Errorf("idle RSS %.1f MB after %d pods, more than %d MB over the %.1f MB after the %d-pod warm-up",
				mb(after.rss), total, *rssMargin, mb(warmMem.rss), warm)
		}
		if *freshMax > 0 && after.rss > fresh.rss+uint64(*freshMax)<<20 {
			t.Errorf("idle RSS %.1f MB after %d pods, more than %d MB over the fresh agent's %.1f MB",
				mb(after.rss), total, *freshMax, mb(fresh.rss))
		}
		if *anonMax > 0 && after.anon > fresh.anon+uint64(*anonMax)<<20 {
			t.Errorf("idle anonymous RSS %.1f MB after %d pods, more than %d MB over the fresh agent's %.1f MB",
				mb(after.anon), total, *anonMax, mb(fresh.anon))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
