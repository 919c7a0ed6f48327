package nodestatus

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusChanged reports whether two node statuses differ in anything but
// the conditions' heartbeat times (the order of conditions does not count).
// A change that is only a heartbeat need not be sent before the report
// period is up.
func StatusChanged(old, cur *v1.NodeStatus) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	if conditionsChanged(old.Conditions, cur.Conditions) {
		return true
	}
	a, b := *old, *cur
	a.Conditions, b.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(&a, &b)
}

func conditionsChanged(old, cur []v1.NodeCondition) bool {
	if len(old) != len(cur) {
		return true
	}
	byType := func(a, b v1.NodeCondition) int { return strings.Compare(string(a.Type), string(b.Type)) }
	a, b := slices.Clone(old), slices.Clone(cur)
	slices.SortStableFunc(a, byType)
	slices.SortStableFunc(b, byType)
	for i := range a {
		a[i].LastHeartbeatTime, b[i].LastHeartbeatTime = metav1.Time{}, metav1.Time{}
		if !equality.Semantic.DeepEqual(&a[i], &b[i]) {
			return true
		}
	}
	return false
}

// conditionTrue reports whether node has a condition of type typ with
// status True.
func conditionTrue(node *v1.Node, typ v1.NodeConditionType) bool {
	if node == nil {
		return false
	}
	i := conditionIndex(node, typ)
	return i >= 0 && node.Status.Conditions[i].Status == v1.ConditionTrue
}
