// Package kubeletconfig compares package kubeletconfig's defaults and
// validation with the kubelet's own (SetDefaults_KubeletConfiguration,
// ValidateKubeletConfiguration) on a table of configurations, and keeps its
// table of feature gates equal to the kubelet's.
package kubeletconfig

import (
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	libcontainercgroups "github.com/opencontainers/cgroups"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kcv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletdefaults "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"

	nk "github.com/nodekit/nodekit/kubeletconfig"
)

// defaultEvictionHard is pkg/kubelet/eviction's DefaultEvictionHard on
// Linux (defaults_linux.go), written out: importing that package would add
// some 250 packages to this test's build, which CI runs.
func defaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// kubeletLoad is what the kubelet does with a decoded file: its scheme's
// defaults, then the eviction defaults of its file loader.
func kubeletLoad(c *kcv1beta1.KubeletConfiguration) {
	kubeletdefaults.SetObjectDefaults_KubeletConfiguration(c)
	if c.EvictionHard == nil {
		c.EvictionHard = map[string]string{}
		for k, v := range defaultEvictionHard() {
			c.EvictionHard[k] = v
		}
	} else if *c.MergeDefaultEvictionSettings {
		for k, v := range defaultEvictionHard() {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
}

func kubeletLoadRecover(c *kcv1beta1.KubeletConfiguration) (panicked any) {
	defer func() { panicked = recover() }()
	kubeletLoad(c)
	return nil
}

func kubeletValidate(t *testing.T, c *kcv1beta1.KubeletConfiguration) []string {
	t.Helper()
	scheme, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		t.Fatal(err)
	}
	internal := &kubeletconfig.KubeletConfiguration{}
	if err := scheme.Convert(c.DeepCopy(), internal, nil); err != nil {
		t.Fatal(err)
	}
	return messages(validation.ValidateKubeletConfiguration(internal, utilfeature.DefaultFeatureGate))
}

// messages flattens an error into its sorted messages (the kubelet's order
// follows map iteration in places).
func messages(err error) []string {
	var out []string
	var agg utilerrors.Aggregate
	var inv *nk.InvalidError
	switch {
	case err == nil:
	case errors.As(err, &inv):
		for _, e := range inv.Errors {
			out = append(out, e.Error())
		}
	case errors.As(err, &agg):
		for _, e := range agg.Errors() {
			out = append(out, messages(e)...)
		}
	default:
		out = append(out, err.Error())
	}
	sort.Strings(out)
	return out
}

func p[T any](v T) *T { return &v }

// configs is the table both sides default and validate: the empty file,
// files setting the fields nodekit maps, and files with mistakes.
func configs() map[string]string {
	h := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n"
	return map[string]string{
		"empty":   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"minimal": h,
		"supported": h + `syncFrequency: 30s
fileCheckFrequency: 5s
httpCheckFrequency: 7s
staticPodPath: /etc/kubernetes/manifests
staticPodURL: http://127.0.0.1:8080/pods
staticPodURLHeader: {X-Token: [a, b]}
address: 127.0.0.1
port: 10350
tlsCertFile: /pki/kubelet.crt
tlsPrivateKeyFile: /pki/kubelet.key
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {clientCAFile: /pki/ca.crt}}
authorization: {mode: AlwaysAllow}
healthzPort: 0
streamingConnectionIdleTimeout: 1h
nodeStatusUpdateFrequency: 4s
nodeLeaseDurationSeconds: 20
maxPods: 17
podsPerCore: 3
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 50
imageMinimumGCAge: 1m
cgroupDriver: systemd
cgroupRoot: /
cpuManagerPolicy: static
reservedSystemCPUs: "0"
memoryManagerPolicy: Static
serializeImagePulls: false
maxParallelImagePulls: 3
evictionHard: {memory.available: 200Mi}
mergeDefaultEvictionSettings: true
evictionSoft: {memory.available: 300Mi}
evictionSoftGracePeriod: {memory.available: 30s}
evictionMinimumReclaim: {memory.available: 50Mi}
evictionPressureTransitionPeriod: 1m
evictionMaxPodGracePeriod: 20
kubeReserved: {cpu: 100m, memory: 100Mi}
systemReserved: {cpu: 100m}
enforceNodeAllocatable: [pods]
containerLogMaxSize: 5Mi
containerLogMaxFiles: 3
podLogsDir: /var/log/nodekit-pods
registerNode: true
registerWithTaints: [{key: a, value: b, effect: NoSchedule}]
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
reservedMemory: [{numaNode: 0, limits: {memory: 1.0001m}}]
`,
		"report follows update": h + "nodeStatusUpdateFrequency: 20s\n",
		"parallel pulls":        h + "maxParallelImagePulls: 5\n",
		"eviction kept":         h + "evictionHard: {memory.available: 1Gi}\n",
		"eviction empty":        h + "evictionHard: {}\n",
		"gates off":             h + "featureGates: {KubeletCrashLoopBackOffMax: false, KubeletEnsureSecretPulledImages: false}\n",
		"bad numbers": h + `nodeLeaseDurationSeconds: -1
eventBurst: -1
eventRecordQPS: -1
healthzPort: 70000
imageGCHighThresholdPercent: 101
imageGCLowThresholdPercent: -1
imageMinimumGCAge: -1s
imageMaximumGCAge: 30s
iptablesDropBit: 32
iptablesMasqueradeBit: -1
kubeAPIBurst: -1
kubeAPIQPS: -2
nodeStatusMaxImages: -2
maxOpenFiles: -1
maxPods: -1
oomScoreAdj: 1001
podsPerCore: -1
port: 70000
readOnlyPort: 70000
registryBurst: -1
registryPullQPS: -1
maxParallelImagePulls: 0
runOnce: true
cpuCFSQuotaPeriod: 2s
containerLogMaxWorkers: 0
containerLogMonitorInterval: 1s
containerLogMaxFiles: 1
podLogsDir: var/log/../pods
memoryThrottlingFactor: 1.5
`,
		"bad enums": h + `topologyManagerPolicy: sometimes
topologyManagerScope: node
hairpinMode: loop
memoryReservationPolicy: All
imagePullCredentialsVerificationPolicy: Maybe
memorySwap: {swapBehavior: Unlimited}
logging: {format: xml, flushFrequency: 0}
tracing: {samplingRatePerMillion: -5}
`,
		"bad allocatable": h + `enforceNodeAllocatable: [pods, pods, system-reserved, system-reserved-compressible, kube-reserved, bogus, none]
cgroupsPerQOS: false
systemCgroups: /system
reservedSystemCPUs: "0-x"
kubeReservedCgroup: /kube
`,
		"bad shutdown": h + `shutdownGracePeriod: 500ms
shutdownGracePeriodCriticalPods: 2s
shutdownGracePeriodByPodPriority: [{priority: 1, shutdownGracePeriodSeconds: 10}]
`,
		"bad pulls":     h + "serializeImagePulls: true\nmaxParallelImagePulls: 4\n",
		"bad taints":    h + "registerWithTaints: [{key: 'a b', effect: Sometimes}, {key: ok, effect: NoSchedule, timeAdded: '2020-01-01T00:00:00Z'}]\n",
		"bad memory":    h + "reservedMemory: [{numaNode: 0, limits: {cpu: 1, memory: 0}}, {numaNode: 0, limits: {memory: 1Gi}}]\n",
		"bad backoff":   h + "crashLoopBackOff: {maxContainerRestartPeriod: 500s}\n",
		"bad allowlist": h + "preloadedImagesVerificationAllowlist: [registry.io/*]\n",
		"bad userns":    h + "userNamespaces: {idsPerPod: 1000}\n",
		"log query":     h + "enableSystemLogQuery: true\nenableSystemLogHandler: false\n",
		"unknown gate":  h + "featureGates: {NoSuchGate: true}\n",
		"locked gate":   h + "featureGates: {NodeSwap: false, ImageMaximumGCAge: false}\n",
		"gate deps":     h + "featureGates: {GracefulNodeShutdown: false}\n",
		"cgroup v1":     "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsingleProcessOOMKill: false\nfailCgroupV1: false\n",
	}
}

// TestDefaultsAndValidationMatchTheKubelet decodes every config of the
// table with nodekit, defaults it with nodekit and with the kubelet, and
// validates it with both: the defaulted configurations must be equal
// field for field, and the error messages the same.
func TestDefaultsAndValidationMatchTheKubelet(t *testing.T) {
	cgroupV1 := !libcontainercgroups.IsCgroup2UnifiedMode()
	for name, doc := range configs() {
		t.Run(name, func(t *testing.T) {
			decoded, err := nk.Decode([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			ours, theirs := decoded.DeepCopy(), decoded.DeepCopy()
			nk.SetDefaults(ours)
			if panicked := kubeletLoadRecover(theirs); panicked != nil {
				// The kubelet panics on feature gates it cannot set while
				// defaulting; its validation reports them.
				t.Logf("the kubelet's defaulting panicked: %v", panicked)
				theirs = ours.DeepCopy()
			} else if d := cmp.Diff(theirs, ours); d != "" {
				t.Errorf("defaults differ from the kubelet's (-kubelet +nodekit):\n%s", d)
			}
			// Defaulting twice changes nothing.
			again := ours.DeepCopy()
			nk.SetDefaults(again)
			if !reflect.DeepEqual(again, ours) {
				t.Errorf("SetDefaults is not idempotent")
			}
			want := kubeletValidate(t, theirs)
			got := messages(nk.Validate(ours, nk.ValidateOptions{CgroupV1: cgroupV1}))
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("validation differs from the kubelet's (-kubelet +nodekit):\n%s", d)
			}
			if name != "minimal" && name != "empty" && name != "supported" && name != "report follows update" &&
				name != "parallel pulls" && name != "eviction kept" && name != "eviction empty" && name != "gates off" && len(want) == 0 {
				t.Errorf("the kubelet finds nothing wrong with %q: the table entry tests nothing", name)
			}
			t.Logf("%d errors", len(want))
		})
	}
}
