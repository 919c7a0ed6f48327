package benchmarks

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// apiPod is a pod of the size an API server hands a node agent: one
// container with resources, ports, env, a mount and a probe, the default
// tolerations and a projected token volume.
func apiPod(src, i int) *v1.Pod {
	sec := int64(300)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID:         types.UID(fmt.Sprintf("uid-%d-%d", src, i)),
			Name:        fmt.Sprintf("pod-%d-%d", src, i),
			Namespace:   "ns",
			Labels:      map[string]string{"app": "web", "tier": "front", "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"note": "x"},
			// As the API server hands them out: a resource version, a
			// creation time, an owner.
			ResourceVersion:   fmt.Sprint(100000 + i),
			Generation:        1,
			CreationTimestamp: metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7c9b6",
				UID: "rs-uid", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app", Image: "registry.local/app:1.2.3",
				Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Env:   []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts: []v1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/token", ReadOnly: true}},
				ReadinessProbe: &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
				},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				ImagePullPolicy:          v1.PullIfNotPresent,
			}},
			Volumes: []v1.Volume{{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}}},
			}}}},
			Tolerations: []v1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec},
			},
			RestartPolicy:      v1.RestartPolicyAlways,
			DNSPolicy:          v1.DNSClusterFirst,
			ServiceAccountName: "default",
			NodeName:           "node-1",
			SchedulerName:      "default-scheduler",
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func ptr[T any](v T) *T { return &v }

// podSet builds n pods of source src.
func podSet(src, n int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = apiPod(src, i)
	}
	return out
}
