package stats

import (
	"strconv"
	"testing"
	"time"
)

// cgroupTree lays out a v1 or v2 cgroup root with the node, the agent's
// cgroup ("agent", as procTree's self/cgroup says), the pods cgroup and
// one burstable pod; cpuNs is the CPU time of every cgroup.
func cgroupTree(t *testing.T, root string, v2 bool, cpuNs uint64) {
	t.Helper()
	const gi = 1 << 30
	files := map[string]string{}
	cpu := strconv.FormatUint(cpuNs, 10)
	usec := strconv.FormatUint(cpuNs/1000, 10)
	add := func(rel string, usage, inactive, limit uint64) {
		if v2 {
			d := rel
			if d != "" {
				d += "/"
				files[d+"memory.current"] = strconv.FormatUint(usage, 10)
				files[d+"memory.max"] = "max"
				if limit > 0 {
					files[d+"memory.max"] = strconv.FormatUint(limit, 10)
				}
			}
			files[d+"memory.stat"] = "anon " + strconv.FormatUint(usage-inactive, 10) + "\nfile " + strconv.FormatUint(inactive, 10) +
				"\ninactive_file " + strconv.FormatUint(inactive, 10) + "\npgfault 100\npgmajfault 3\n"
			files[d+"cpu.stat"] = "usage_usec " + usec + "\nuser_usec 1\n"
			files[d+"pids.current"] = "7"
			return
		}
		d := rel
		if d != "" {
			d = "/" + d
		}
		files["memory"+d+"/memory.usage_in_bytes"] = strconv.FormatUint(usage, 10)
		files["memory"+d+"/memory.limit_in_bytes"] = "9223372036854771712"
		if limit > 0 {
			files["memory"+d+"/memory.limit_in_bytes"] = strconv.FormatUint(limit, 10)
		}
		files["memory"+d+"/memory.stat"] = "cache 1\nrss 2\ntotal_rss " + strconv.FormatUint(usage-inactive, 10) +
			"\ntotal_inactive_file " + strconv.FormatUint(inactive, 10) + "\ntotal_pgfault 100\ntotal_pgmajfault 3\n"
		files["cpu,cpuacct"+d+"/cpuacct.usage"] = cpu
		files["pids"+d+"/pids.current"] = "7"
	}
	if v2 {
		files["cgroup.controllers"] = "cpu memory pids"
	}
	add("", 4*gi, gi, 0)
	add("agent", 64<<20, 0, 0)
	add("kubepods", 2*gi, 512<<20, 6*gi)
	add("kubepods/burstable", gi, 0, 0)
	add("kubepods/burstable/poduid-web", 300<<20, 100<<20, gi)
	tree(t, root, files)
}

func TestSummaryCgroups(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[v2], func(t *testing.T) {
			e := newEnv(t)
			e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
			e.runPod("default", "nocgroup", "uid-other", map[string][2]string{"app": {"100m", "4Mi"}})
			root := t.TempDir()
			cgroupTree(t, root, v2, 5_000_000_000)
			p := e.provider(Config{CgroupRoot: root, PodsCgroup: "kubepods", RuntimeCgroup: "system.slice/containerd.service"})
			s := e.summary(p, false)
			n := s.Node
			if n.CPU == nil || val(n.CPU.UsageCoreNanoSeconds) != uint64(5_000_000_000) || n.CPU.UsageNanoCores != nil {
				t.Fatalf("node CPU %+v, want 5 s and no rate yet", n.CPU)
			}
			if n.Memory == nil || val(n.Memory.WorkingSetBytes) != uint64(3<<30) || val(n.Memory.UsageBytes) != uint64(4<<30) ||
				val(n.Memory.AvailableBytes) != uint64(8<<30-3<<30) || val(n.Memory.RSSBytes) != uint64(3<<30) ||
				val(n.Memory.PageFaults) != uint64(100) || val(n.Memory.MajorPageFaults) != uint64(3) {
				t.Errorf("node memory %+v", n.Memory)
			}
			sys := map[string]bool{}
			for _, c := range n.SystemContainers {
				sys[c.Name] = true
				if c.Name == "pods" && (val(c.Memory.WorkingSetBytes) != uint64(1536<<20) || val(c.Memory.AvailableBytes) != uint64(6<<30-1536<<20)) {
					t.Errorf("pods system container memory %+v", c.Memory)
				}
				if c.Name == "kubelet" && (val(c.Memory.WorkingSetBytes) != uint64(64<<20) || !c.StartTime.Time.Equal(t0)) {
					t.Errorf("kubelet system container %+v", c)
				}
			}
			if !sys["pods"] || !sys["kubelet"] || sys["runtime"] || len(sys) != 2 {
				t.Errorf("system containers %v, want kubelet and pods (the runtime cgroup does not exist)", sys)
			}
			web := s.pod(t, "web")
			if val(web.CPU.UsageCoreNanoSeconds) != uint64(5_000_000_000) || val(web.Memory.WorkingSetBytes) != uint64(200<<20) ||
				val(web.Memory.AvailableBytes) != uint64(1<<30-200<<20) {
				t.Errorf("web from its pod cgroup: cpu %+v memory %+v", web.CPU, web.Memory)
			}
			if web.ProcessStats == nil || val(web.ProcessStats.ProcessCount) != uint64(7) {
				t.Errorf("web processes %+v, want pids.current 7", web.ProcessStats)
			}
			if other := s.pod(t, "nocgroup"); val(other.Memory.WorkingSetBytes) != uint64(4<<20) {
				t.Errorf("a pod without a cgroup has memory %+v, want its runtime stats", other.Memory)
			}

			// A second reading 10 s later with 2 s more CPU: 200m.
			e.clk.Step(10 * time.Second)
			cgroupTree(t, root, v2, 7_000_000_000)
			s = e.summary(p, true)
			if got := val(s.Node.CPU.UsageNanoCores); got != uint64(200_000_000) {
				t.Errorf("node usageNanoCores %v, want 200000000", got)
			}
			if got := val(s.pod(t, "web").CPU.UsageNanoCores); got != uint64(200_000_000) {
				t.Errorf("pod usageNanoCores %v, want 200000000", got)
			}
			for _, c := range s.Node.SystemContainers {
				if got := val(c.CPU.UsageNanoCores); got != uint64(200_000_000) {
					t.Errorf("%s usageNanoCores %v, want 200000000", c.Name, got)
				}
			}
		})
	}
}

// The layout is asked until it answers; until then there are no cgroup
// stats, and the summary still has the pods.
func TestSummaryLayoutLate(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"100m", "4Mi"}})
	root := t.TempDir()
	cgroupTree(t, root, false, 1e9)
	var ready bool
	p := e.provider(Config{Layout: func() (CgroupLayout, error) {
		if !ready {
			return CgroupLayout{}, errNotYet
		}
		return CgroupLayout{CgroupRoot: root, PodsCgroup: "/kubepods"}, nil
	}})
	s := e.summary(p, true)
	if s.Node.CPU != nil || len(s.Pods) != 1 {
		t.Fatalf("before the layout: node CPU %+v, %d pods", s.Node.CPU, len(s.Pods))
	}
	ready = true
	s = e.summary(p, true)
	if s.Node.CPU == nil || val(s.pod(t, "web").Memory.WorkingSetBytes) != uint64(200<<20) {
		t.Errorf("after the layout: node CPU %+v, web memory %+v", s.Node.CPU, s.pod(t, "web").Memory)
	}
}

// An agent whose cpu cgroup is the root (v1, as on a host where only its
// memory cgroup is its own) reports its memory as "kubelet", not the
// node's CPU.
func TestSummaryKubeletInRootCPUCgroup(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	cgroupTree(t, root, false, 9_000_000_000)
	proc := procTree(t)
	tree(t, proc, map[string]string{"self/cgroup": "5:memory:/agent\n4:cpu,cpuacct:/\n"})
	p := e.provider(Config{CgroupRoot: root, ProcRoot: proc})
	s := e.summary(p, true)
	if len(s.Node.SystemContainers) != 1 {
		t.Fatalf("system containers %+v, want kubelet", s.Node.SystemContainers)
	}
	k := s.Node.SystemContainers[0]
	if k.Name != "kubelet" || k.CPU != nil || k.Memory == nil || val(k.Memory.WorkingSetBytes) != uint64(64<<20) {
		t.Errorf("kubelet %+v: want its memory cgroup's 64Mi and no CPU (its cpu cgroup is the node's)", k)
	}
}
