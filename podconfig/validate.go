package podconfig

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxUIDLength bounds a pod UID; UIDs become directory names on the node.
const maxUIDLength = 128

// ValidationError is the error ValidatePod returns: every problem found, each
// naming its field (e.g. "spec.containers[0].name"). It wraps ErrInvalidPod.
type ValidationError struct {
	Errs field.ErrorList
}

// maxReportedErrors bounds how many problems Error spells out, so a pod
// with thousands of bad fields does not make a megabyte message.
const maxReportedErrors = 20

func (e *ValidationError) Error() string {
	if len(e.Errs) > maxReportedErrors {
		return fmt.Sprintf("%s: %s (and %d more)", ErrInvalidPod.Error(),
			e.Errs[:maxReportedErrors].ToAggregate().Error(), len(e.Errs)-maxReportedErrors)
	}
	return ErrInvalidPod.Error() + ": " + e.Errs.ToAggregate().Error()
}

// Unwrap makes errors.Is(err, ErrInvalidPod) hold.
func (e *ValidationError) Unwrap() error { return ErrInvalidPod }

// ValidatePod checks the rules of pod validation that matter on a node: names
// and namespace, UID and name usable as single safe path segments, unique
// container names across init and regular containers, images, ports,
// resources (parse, non-negative, requests ≤ limits), volumes (unique names,
// exactly one source), volume mounts (existing volume, absolute path, safe
// subPath), env names, restartPolicy and dnsPolicy values. With static set
// it also refuses references to API objects, which a static pod cannot have:
// service accounts, secrets, config maps, persistent volume claims (also
// ephemeral), CSI volumes, resource claims, cluster trust bundles and pod
// certificates, whether through volumes, projected sources, env valueFrom,
// envFrom or imagePullSecrets.
//
// It returns nil or a *ValidationError.
func ValidatePod(pod *v1.Pod, static bool) error {
	if pod == nil {
		return &ValidationError{Errs: field.ErrorList{field.Required(field.NewPath("pod"), "")}}
	}
	var errs field.ErrorList
	errs = append(errs, validateMeta(pod)...)
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	if static {
		if fld, what := apiObjectReference(pod); what != "" {
			errs = append(errs, field.Forbidden(fld, "static pods may not reference "+what))
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Errs: errs}
	}
	return nil
}

// IsSafePathSegment reports whether s can be used as one path element: not
// empty, not "." or "..", no '/', '\\' or NUL, at most 253 bytes.
func IsSafePathSegment(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '\\' || c == 0 {
			return false
		}
	}
	return true
}

func validateMeta(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "name is required"))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(pod.Name, false) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	if pod.Namespace == "" {
		errs = append(errs, field.Required(meta.Child("namespace"), ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(pod.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
		}
	}
	uid := string(pod.UID)
	switch {
	case uid == "":
		errs = append(errs, field.Required(meta.Child("uid"), ""))
	case len(uid) > maxUIDLength:
		errs = append(errs, field.TooLong(meta.Child("uid"), "", maxUIDLength))
	case !IsSafePathSegment(uid):
		errs = append(errs, field.Invalid(meta.Child("uid"), uid, "must be usable as a single path segment (no '/', '\\', NUL, '.' or '..')"))
	}
	errs = append(errs, metavalidation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)
	return errs
}

func validateSpec(s *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, vol := range s.Volumes {
		vp := p.Child("volumes").Index(i)
		if vol.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsDNS1123Label(vol.Name) {
				errs = append(errs, field.Invalid(vp.Child("name"), vol.Name, msg))
			}
			if volumes.Has(vol.Name) {
				errs = append(errs, field.Duplicate(vp.Child("name"), vol.Name))
			}
			volumes.Insert(vol.Name)
		}
		if n := countVolumeSources(&vol.VolumeSource); n != 1 {
			if n == 0 {
				errs = append(errs, field.Required(vp, "must specify a volume type"))
			} else {
				errs = append(errs, field.Forbidden(vp, "may not specify more than 1 volume type"))
			}
		}
		if ed := vol.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(vp.Child("emptyDir", "sizeLimit"), ed.SizeLimit.String(), "must be greater than or equal to 0"))
		}
		if vol.HostPath != nil && !path.IsAbs(vol.HostPath.Path) {
			errs = append(errs, field.Invalid(vp.Child("hostPath", "path"), vol.HostPath.Path, "must be an absolute path"))
		}
	}
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	portNames := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], p.Child("initContainers").Index(i), names, portNames, volumes)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], p.Child("containers").Index(i), names, portNames, volumes)...)
	}
	for i, ec := range s.EphemeralContainers {
		ep := p.Child("ephemeralContainers").Index(i).Child("name")
		if names.Has(ec.Name) {
			errs = append(errs, field.Duplicate(ep, ec.Name))
		}
	}
	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	case "":
		errs = append(errs, field.Required(p.Child("restartPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy,
			[]string{string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever)}))
	}
	switch s.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault:
	case v1.DNSNone:
		if s.DNSConfig == nil || len(s.DNSConfig.Nameservers) == 0 {
			errs = append(errs, field.Required(p.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
		}
	case "":
		errs = append(errs, field.Required(p.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy,
			[]string{string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone)}))
	}
	if r := s.Resources; r != nil {
		errs = append(errs, validateResourceNames(r.Limits, p.Child("resources", "limits"))...)
		errs = append(errs, validateResourceNames(r.Requests, p.Child("resources", "requests"))...)
	}
	errs = append(errs, validateResourceNames(s.Overhead, p.Child("overhead"))...)
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if d := s.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be > 0"))
	}
	return errs
}

func validateContainer(c *v1.Container, p *field.Path, names, portNames, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever, "":
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]string{string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever)}))
	}
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range utilvalidation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP, "":
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
		}
	}
	rp := p.Child("resources")
	errs = append(errs, validateResourceNames(c.Resources.Limits, rp.Child("limits"))...)
	errs = append(errs, validateResourceNames(c.Resources.Requests, rp.Child("requests"))...)
	for name, q := range c.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range c.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
		if lim, ok := c.Resources.Limits[name]; ok && q.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		} else if mountPaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
		if m.SubPath != "" && !isSafeRelativePath(m.SubPath) {
			errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, "must be a relative path without '..'"))
		}
	}
	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else if strings.ContainsAny(e.Name, "=\x00") {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "must not contain '=' or NUL"))
		}
		if e.ValueFrom != nil {
			n := 0
			for _, set := range []bool{e.ValueFrom.FieldRef != nil, e.ValueFrom.ResourceFieldRef != nil,
				e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil, e.ValueFrom.FileKeyRef != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "must specify exactly one source"))
			}
			if e.Value != "" {
				errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
			}
		}
	}
	return errs
}

// validateResourceNames checks the names of a resource list as the API
// server does: each a qualified name ("cpu", "example.com/gpu"), and a
// hugepages-<size> name with a page size that is bounded before it is
// parsed (kubetypes.HugePageSize), so no later consumer parses a slow one.
func validateResourceNames(rl v1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name := range rl {
		s := string(name)
		for _, msg := range utilvalidation.IsQualifiedName(s) {
			errs = append(errs, field.Invalid(p.Key(s), s, msg))
		}
		if strings.HasPrefix(s, v1.ResourceHugePagesPrefix) {
			if _, err := kubetypes.HugePageSize(name); err != nil {
				errs = append(errs, field.Invalid(p.Key(s), s, err.Error()))
			}
		}
	}
	return errs
}

func isSafeRelativePath(p string) bool {
	if path.IsAbs(p) || strings.ContainsRune(p, '\x00') {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

func countVolumeSources(s *v1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		s.HostPath != nil, s.EmptyDir != nil, s.GCEPersistentDisk != nil, s.AWSElasticBlockStore != nil,
		s.GitRepo != nil, s.Secret != nil, s.NFS != nil, s.ISCSI != nil, s.Glusterfs != nil,
		s.PersistentVolumeClaim != nil, s.RBD != nil, s.FlexVolume != nil, s.Cinder != nil, s.CephFS != nil,
		s.Flocker != nil, s.DownwardAPI != nil, s.FC != nil, s.AzureFile != nil, s.ConfigMap != nil,
		s.VsphereVolume != nil, s.Quobyte != nil, s.AzureDisk != nil, s.PhotonPersistentDisk != nil,
		s.Projected != nil, s.PortworxVolume != nil, s.ScaleIO != nil, s.StorageOS != nil, s.CSI != nil,
		s.Ephemeral != nil, s.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

// apiObjectReference returns the first reference to an API object in pod,
// as the field that holds it and what kind of object it names.
func apiObjectReference(pod *v1.Pod) (*field.Path, string) {
	spec := field.NewPath("spec")
	if pod.Spec.ServiceAccountName != "" {
		return spec.Child("serviceAccountName"), "serviceaccounts"
	}
	if pod.Spec.DeprecatedServiceAccount != "" {
		return spec.Child("serviceAccount"), "serviceaccounts"
	}
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return spec.Child("imagePullSecrets"), "secrets"
	}
	type ctr struct {
		c *v1.Container
		p *field.Path
	}
	var all []ctr
	for i := range pod.Spec.InitContainers {
		all = append(all, ctr{&pod.Spec.InitContainers[i], spec.Child("initContainers").Index(i)})
	}
	for i := range pod.Spec.Containers {
		all = append(all, ctr{&pod.Spec.Containers[i], spec.Child("containers").Index(i)})
	}
	for _, c := range all {
		for i, e := range c.c.EnvFrom {
			if e.SecretRef != nil {
				return c.p.Child("envFrom").Index(i).Child("secretRef"), "secrets"
			}
			if e.ConfigMapRef != nil {
				return c.p.Child("envFrom").Index(i).Child("configMapRef"), "configmaps"
			}
		}
		for i, e := range c.c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				return c.p.Child("env").Index(i).Child("valueFrom", "secretKeyRef"), "secrets"
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				return c.p.Child("env").Index(i).Child("valueFrom", "configMapKeyRef"), "configmaps"
			}
		}
	}
	for i, ec := range pod.Spec.EphemeralContainers {
		p := spec.Child("ephemeralContainers").Index(i)
		for j, e := range ec.EnvFrom {
			if e.SecretRef != nil || e.ConfigMapRef != nil {
				return p.Child("envFrom").Index(j), "secrets or configmaps"
			}
		}
		for j, e := range ec.Env {
			if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
				return p.Child("env").Index(j).Child("valueFrom"), "secrets or configmaps"
			}
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return spec.Child("resourceClaims"), "resourceclaims"
	}
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case v.Secret != nil:
			return p.Child("secret"), "secrets (via secret volumes)"
		case v.ConfigMap != nil:
			return p.Child("configMap"), "configmaps (via configmap volumes)"
		case v.CSI != nil:
			return p.Child("csi"), "csidrivers (via CSI volumes)"
		case v.Glusterfs != nil:
			return p.Child("glusterfs"), "endpoints (via glusterFS volumes)"
		case v.PersistentVolumeClaim != nil:
			return p.Child("persistentVolumeClaim"), "persistentvolumeclaims"
		case v.Ephemeral != nil:
			return p.Child("ephemeral"), "persistentvolumeclaims (via ephemeral volumes)"
		case v.AzureFile != nil:
			return p.Child("azureFile"), "secrets (via azureFile volumes)"
		case v.CephFS != nil && v.CephFS.SecretRef != nil:
			return p.Child("cephfs", "secretRef"), "secrets"
		case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
			return p.Child("flexVolume", "secretRef"), "secrets"
		case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
			return p.Child("iscsi", "secretRef"), "secrets"
		case v.RBD != nil && v.RBD.SecretRef != nil:
			return p.Child("rbd", "secretRef"), "secrets"
		case v.ScaleIO != nil && v.ScaleIO.SecretRef != nil:
			return p.Child("scaleIO", "secretRef"), "secrets"
		case v.StorageOS != nil && v.StorageOS.SecretRef != nil:
			return p.Child("storageos", "secretRef"), "secrets"
		case v.Cinder != nil && v.Cinder.SecretRef != nil:
			return p.Child("cinder", "secretRef"), "secrets"
		case v.Projected != nil:
			for j, s := range v.Projected.Sources {
				sp := p.Child("projected", "sources").Index(j)
				switch {
				case s.ConfigMap != nil:
					return sp.Child("configMap"), "configmaps (via projected volumes)"
				case s.Secret != nil:
					return sp.Child("secret"), "secrets (via projected volumes)"
				case s.ServiceAccountToken != nil:
					return sp.Child("serviceAccountToken"), "serviceaccounts (via projected volumes)"
				case s.ClusterTrustBundle != nil:
					return sp.Child("clusterTrustBundle"), "clustertrustbundles"
				case s.PodCertificate != nil:
					return sp.Child("podCertificate"), "podcertificates"
				case s.DownwardAPI != nil:
				default:
					return sp, "an unknown projected source"
				}
			}
		}
	}
	return nil, ""
}
