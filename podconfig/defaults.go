package podconfig

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// SetPodDefaults fills the API-server defaults that matter for running a pod
// on a node and that a static pod (never seen by an API server) lacks:
// restartPolicy Always, dnsPolicy ClusterFirst, terminationGracePeriodSeconds
// 30, schedulerName, enableServiceLinks, an empty pod securityContext; per
// container imagePullPolicy (Always for ":latest" or no tag, else
// IfNotPresent), terminationMessagePath/Policy, port protocol TCP, requests
// copied from limits where unset, probe timings and handler defaults; and
// hostPath type, downward API modes and field-ref API versions. Fields
// already set are left alone.
func SetPodDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		t := v1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &t
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.ServiceAccountName == "" && s.DeprecatedServiceAccount != "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		vol := &s.Volumes[i]
		if vol.HostPath != nil && vol.HostPath.Type == nil {
			t := v1.HostPathUnset
			vol.HostPath.Type = &t
		}
		if vol.DownwardAPI != nil {
			if vol.DownwardAPI.DefaultMode == nil {
				m := v1.DownwardAPIVolumeSourceDefaultMode
				vol.DownwardAPI.DefaultMode = &m
			}
			for j := range vol.DownwardAPI.Items {
				if f := vol.DownwardAPI.Items[j].FieldRef; f != nil && f.APIVersion == "" {
					f.APIVersion = "v1"
				}
			}
		}
		if vol.Projected != nil {
			if vol.Projected.DefaultMode == nil {
				m := v1.ProjectedVolumeSourceDefaultMode
				vol.Projected.DefaultMode = &m
			}
			for _, src := range vol.Projected.Sources {
				if src.DownwardAPI == nil {
					continue
				}
				for j := range src.DownwardAPI.Items {
					if f := src.DownwardAPI.Items[j].FieldRef; f != nil && f.APIVersion == "" {
						f.APIVersion = "v1"
					}
				}
			}
		}
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	if len(c.Resources.Limits) > 0 {
		if c.Resources.Requests == nil {
			c.Resources.Requests = make(v1.ResourceList, len(c.Resources.Limits))
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		defaultHandler(c.Lifecycle.PostStart)
		defaultHandler(c.Lifecycle.PreStop)
	}
}

func defaultHandler(h *v1.LifecycleHandler) {
	if h != nil && h.HTTPGet != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(g *v1.HTTPGetAction) {
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = v1.URISchemeHTTP
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
}

// defaultPullPolicy: Always when the image has no tag or the tag "latest"
// (and no digest), otherwise IfNotPresent.
func defaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	name := image
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 || name[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
