// Package downward renders the downward API values that environment
// variables (runtime) and downwardAPI volumes (volumemgr) both expose: label
// and annotation maps, and container resource limits and requests. One
// implementation, so an env var and a volume file never disagree.
//
//	labels := downward.FormatMap(pod.Labels) // key="value" lines, sorted
//	c := downward.Container(pod, ref.ContainerName)
//	v, err := downward.ResourceValue(c, ref, nodeAllocatable) // "limits.cpu" etc.
package downward
