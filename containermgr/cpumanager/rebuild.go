package cpumanager

import (
	"context"
	"fmt"
	"sort"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// candidate is one running container that may get its exclusive CPUs
// back.
type candidate struct {
	uid, name, id string
	cpus          cpuset.CPUSet
}

// rebuild makes a static state from the running containers, for when the
// checkpoint was lost or set aside: every running container of an active
// Guaranteed pod with a whole-number cpu request whose current cpuset has
// exactly that many CPUs of the machine, none reserved and none shared
// with another such container, keeps those CPUs exclusively; the rest of
// the machine is the shared pool. Containers left out are logged and go
// to the shared pool on the next Reconcile. Failures to list are logged
// and give the empty state: rebuilding is best effort.
func (m *Manager) rebuild(ctx context.Context, activePods func() []*v1.Pod) state {
	all := m.cfg.Topology.All()
	st := newState(all)
	log := m.cfg.Logger
	if m.cfg.Runtime == nil || activePods == nil {
		log.Info("cpu manager state not rebuilt from running containers: no Runtime or no active pods func")
		return st
	}
	active := map[string]*v1.Pod{}
	for _, p := range activePods() {
		if p != nil {
			active[string(p.UID)] = p
		}
	}
	// An agent starts its managers before its pod sources have delivered:
	// with no pods known yet, the runtime alone decides (every pinned
	// container keeps a usable, unshared cpuset); admission then finds the
	// assignment (a repeat allocation is a no-op) and Reconcile purges the
	// entries of pods that did not come back once the sources are ready.
	runtimeOnly := len(active) == 0
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		log.Error("cpu manager state not rebuilt: list running containers", zap.Error(err))
		return st
	}
	var cands []candidate
	for _, c := range ctrs {
		uid, name, id := c.GetLabels()[labelPodUID], c.GetLabels()[labelContainerName], c.GetId()
		if uid == "" || name == "" || id == "" {
			continue
		}
		n, who := -1, uid // -1: the pod's request is not known (runtime only)
		if !runtimeOnly {
			pod := active[uid]
			if pod == nil {
				log.Info("rebuild: container of a pod that is not active left in the shared pool",
					zap.String("podUID", uid), zap.String("container", name), zap.String("containerID", id))
				continue
			}
			spec, _ := findContainer(pod, name)
			if spec == nil {
				log.Info("rebuild: container not in its pod's spec left in the shared pool",
					zap.String("pod", podName(pod)), zap.String("container", name), zap.String("containerID", id))
				continue
			}
			if n = exclusiveCPUs(pod, spec); n == 0 {
				continue // not entitled: the shared pool, nothing to restore
			}
			who = podName(pod)
		}
		cpus, err := m.currentCPUSet(ctx, id)
		if err != nil {
			log.Warn("rebuild: current cpuset unknown, container left in the shared pool",
				zap.String("pod", who), zap.String("container", name), zap.String("containerID", id), zap.Error(err))
			continue
		}
		if runtimeOnly && cpus.Equals(all.Difference(m.reserved)) {
			continue // the whole shared pool: a container that was not pinned
		}
		if reason := m.unusable(cpus, n); reason != "" {
			log.Warn("rebuild: container's cpuset not restored, it goes to the shared pool",
				zap.String("pod", who), zap.String("container", name), zap.String("containerID", id),
				zap.Stringer("cpuset", cpus), zap.String("reason", reason))
			continue
		}
		cands = append(cands, candidate{uid: uid, name: name, id: id, cpus: cpus})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].uid != cands[j].uid {
			return cands[i].uid < cands[j].uid
		}
		if cands[i].name != cands[j].name {
			return cands[i].name < cands[j].name
		}
		return cands[i].id < cands[j].id
	})
	// A cpuset shared by two candidates, or two running instances of one
	// container, can't be told apart: all of them are left out.
	bad := make([]bool, len(cands))
	for i := range cands {
		for j := i + 1; j < len(cands); j++ {
			same := cands[i].uid == cands[j].uid && cands[i].name == cands[j].name
			if same || !cands[i].cpus.Intersection(cands[j].cpus).IsEmpty() {
				bad[i], bad[j] = true, true
			}
		}
	}
	for i, c := range cands {
		if bad[i] {
			log.Warn("rebuild: container's cpuset overlaps another container's, not restored; it goes to the shared pool",
				zap.String("podUID", c.uid), zap.String("container", c.name), zap.String("containerID", c.id),
				zap.Stringer("cpuset", c.cpus))
			continue
		}
		st.set(c.uid, c.name, c.cpus)
		st.defaultSet = st.defaultSet.Difference(c.cpus)
		log.Info("rebuild: exclusive cpus restored from the running container",
			zap.String("podUID", c.uid), zap.String("container", c.name), zap.String("containerID", c.id),
			zap.Stringer("cpuset", c.cpus))
	}
	return st
}

// currentCPUSet is the cpuset the running container is confined to now.
func (m *Manager) currentCPUSet(ctx context.Context, id string) (cpuset.CPUSet, error) {
	var text string
	if m.cfg.CurrentCPUSet != nil {
		s, err := m.cfg.CurrentCPUSet(ctx, id)
		if err != nil {
			return cpuset.New(), err
		}
		text = s
	} else {
		resp, err := m.cfg.Runtime.ContainerStatus(ctx, id, false)
		if err != nil {
			return cpuset.New(), fmt.Errorf("container status: %w", err)
		}
		text = resp.GetStatus().GetResources().GetLinux().GetCpusetCpus()
		if text == "" {
			return cpuset.New(), fmt.Errorf("the runtime reports no cpuset for the container")
		}
	}
	set, err := topology.ParseCPUSet(text)
	if err != nil {
		return cpuset.New(), fmt.Errorf("cpuset %.64q: %w", text, err)
	}
	return set, nil
}

// unusable says why a container's current cpuset can't be its exclusive
// assignment of n CPUs ("" when it can); n < 0 skips the size check.
func (m *Manager) unusable(cpus cpuset.CPUSet, n int) string {
	switch {
	case cpus.IsEmpty():
		return "empty cpuset"
	case !cpus.IsSubsetOf(m.cfg.Topology.All()):
		return "cpus outside the machine"
	case !cpus.Intersection(m.reserved).IsEmpty():
		return fmt.Sprintf("includes reserved cpus %s", m.reserved)
	case n >= 0 && cpus.Size() != n:
		return fmt.Sprintf("%d cpus for a request of %d", cpus.Size(), n)
	}
	return ""
}
