package nodestatus

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// conditionStatuses maps each condition type of node to its status.
func conditionStatuses(node *v1.Node) map[v1.NodeConditionType]v1.ConditionStatus {
	out := make(map[v1.NodeConditionType]v1.ConditionStatus, len(node.Status.Conditions))
	for _, c := range node.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

// nodeEventReasons: the reasons of a condition's True and False events.
var nodeEventReasons = map[v1.NodeConditionType][2]string{
	v1.NodeReady:          {kubetypes.ReasonNodeReady, kubetypes.ReasonNodeNotReady},
	v1.NodeMemoryPressure: {kubetypes.ReasonNodeHasInsufficientMemory, kubetypes.ReasonNodeHasSufficientMemory},
	v1.NodeDiskPressure:   {kubetypes.ReasonNodeHasDiskPressure, kubetypes.ReasonNodeHasNoDiskPressure},
	v1.NodePIDPressure:    {kubetypes.ReasonNodeHasInsufficientPID, kubetypes.ReasonNodeHasSufficientPID},
}

// recordEvents records the node events of the setters' changes, as the
// kubelet's setters do: a pressure condition set for the first time or
// flipped; Ready flipped (not its first setting); the boot ID changed.
// A change already recorded (the same status as the last event of its
// type) is not recorded again.
func (c *Controller) recordEvents(node *v1.Node, before map[v1.NodeConditionType]v1.ConditionStatus, bootID string) {
	if c.cfg.Recorder == nil {
		return
	}
	ref := kubetypes.NodeRef(c.cfg.NodeName)
	for _, cond := range node.Status.Conditions {
		reasons, ok := nodeEventReasons[cond.Type]
		if !ok || (cond.Status != v1.ConditionTrue && cond.Status != v1.ConditionFalse) {
			continue
		}
		old, existed := before[cond.Type]
		if old == cond.Status || (cond.Type == v1.NodeReady && !existed) {
			continue
		}
		if last, ok := c.recorded[cond.Type]; ok && last == cond.Status {
			continue
		}
		if c.recorded == nil {
			c.recorded = map[v1.NodeConditionType]v1.ConditionStatus{}
		}
		c.recorded[cond.Type] = cond.Status
		reason := reasons[0]
		if cond.Status == v1.ConditionFalse {
			reason = reasons[1]
		}
		c.cfg.Recorder.Event(ref, v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", c.cfg.NodeName, reason))
	}
	if now := node.Status.NodeInfo.BootID; bootID != "" && now != bootID && !c.rebooted {
		c.rebooted = true
		c.cfg.Recorder.Event(ref, v1.EventTypeWarning, kubetypes.ReasonRebooted,
			fmt.Sprintf("Node %s has been rebooted, boot id: %s", c.cfg.NodeName, now))
	}
}
