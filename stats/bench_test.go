package stats

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// benchEnv runs 110 pods of two containers on the fake runtime and, with
// cgroups, lays out a v2 cgroup root with each pod's cgroup.
func benchEnv(b *testing.B, cgroups bool) (*env, *Provider) {
	e := newEnv(b)
	cfg := Config{}
	var root string
	files := map[string]string{}
	if cgroups {
		root = b.TempDir()
		files["cgroup.controllers"] = "cpu memory pids"
		files["memory.stat"] = "anon 100\nfile 100\ninactive_file 10\n"
		files["cpu.stat"] = "usage_usec 100\n"
	}
	for i := range 110 {
		uid := fmt.Sprintf("uid-%03d", i)
		e.runPod("default", "pod-"+uid, uid, map[string][2]string{"app": {"100m", "8Mi"}, "sidecar": {"10m", "2Mi"}})
		if cgroups {
			d := "kubepods/burstable/pod" + uid + "/"
			files[d+"memory.current"] = strconv.Itoa(1000 + i)
			files[d+"memory.stat"] = "anon 900\ninactive_file 10\npgfault 1\npgmajfault 0\n"
			files[d+"memory.max"] = "max"
			files[d+"cpu.stat"] = "usage_usec " + strconv.Itoa(5000+i) + "\n"
			files[d+"pids.current"] = "3"
		}
	}
	if cgroups {
		files["kubepods/memory.current"] = "1000"
		files["kubepods/memory.stat"] = "anon 900\ninactive_file 10\n"
		files["kubepods/memory.max"] = "max"
		files["kubepods/cpu.stat"] = "usage_usec 1\n"
		tree(b, root, files)
		cfg.CgroupRoot, cfg.PodsCgroup = root, "kubepods"
	}
	e.clk.Step(time.Second)
	cfg.NodeName, cfg.Runtime, cfg.Pods, cfg.Clock = "node-1", e.rt, fakePods{e.rt}, e.clk
	cfg.ProcRoot = b.TempDir()
	tree(b, cfg.ProcRoot, map[string]string{
		"meminfo": "MemTotal: 8388608 kB\n", "sys/kernel/pid_max": "4194304\n", "loadavg": "0 0 0 1/2 3\n", "stat": "btime 1\n",
	})
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return e, p
}

// BenchmarkSummary110Pods: one /stats/summary of 110 pods of two
// containers each, on the fake runtime (its CRI calls included).
func BenchmarkSummary110Pods(b *testing.B) {
	for _, c := range []struct {
		name          string
		cgroups, only bool
	}{{"cri", false, false}, {"cri-only-cpu-memory", false, true}, {"cgroups", true, false}, {"cgroups-only-cpu-memory", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			e, p := benchEnv(b, c.cgroups)
			if s, err := p.Summary(e.ctx, c.only); err != nil || len(s.Pods) != 110 {
				b.Fatalf("summary: %v", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Summary(e.ctx, c.only); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
