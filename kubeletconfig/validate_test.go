package kubeletconfig

import (
	"errors"
	"strings"
	"testing"
	"time"

	kc "k8s.io/kubelet/config/v1beta1"
)

func loaded(t *testing.T, doc string) *kc.KubeletConfiguration {
	t.Helper()
	c, err := Decode([]byte(header + doc))
	if err != nil {
		t.Fatal(err)
	}
	SetDefaults(c)
	return c
}

func TestDefaults(t *testing.T) {
	c := loaded(t, "")
	for _, d := range []struct {
		field string
		ok    bool
	}{
		{"syncFrequency 1m", c.SyncFrequency.Duration == time.Minute},
		{"fileCheckFrequency 20s", c.FileCheckFrequency.Duration == 20*time.Second},
		{"httpCheckFrequency 20s", c.HTTPCheckFrequency.Duration == 20*time.Second},
		{"port 10250", c.Port == 10250},
		{"healthzPort 10248", *c.HealthzPort == 10248},
		{"authentication webhook on, anonymous off", *c.Authentication.Webhook.Enabled && !*c.Authentication.Anonymous.Enabled},
		{"authorization Webhook", c.Authorization.Mode == kc.KubeletAuthorizationModeWebhook},
		{"maxPods 110", c.MaxPods == 110},
		{"nodeStatusUpdateFrequency 10s", c.NodeStatusUpdateFrequency.Duration == 10*time.Second},
		{"nodeStatusReportFrequency 5m", c.NodeStatusReportFrequency.Duration == 5*time.Minute},
		{"nodeLeaseDurationSeconds 40", c.NodeLeaseDurationSeconds == 40},
		{"image GC 85/80, 2m", *c.ImageGCHighThresholdPercent == 85 && *c.ImageGCLowThresholdPercent == 80 && c.ImageMinimumGCAge.Duration == 2*time.Minute},
		{"cgroupDriver cgroupfs, cgroupsPerQOS", c.CgroupDriver == "cgroupfs" && *c.CgroupsPerQOS},
		{"cpu/memory/topology none", c.CPUManagerPolicy == "none" && c.MemoryManagerPolicy == "None" && c.TopologyManagerPolicy == "none"},
		{"enforceNodeAllocatable [pods]", len(c.EnforceNodeAllocatable) == 1 && c.EnforceNodeAllocatable[0] == "pods"},
		{"container logs 10Mi x 5", c.ContainerLogMaxSize == "10Mi" && *c.ContainerLogMaxFiles == 5},
		{"serializeImagePulls", *c.SerializeImagePulls},
		{"eviction hard", len(c.EvictionHard) == 5 && c.EvictionHard["memory.available"] == "100Mi"},
		{"eviction pressure transition 5m", c.EvictionPressureTransitionPeriod.Duration == 5*time.Minute},
		{"registerNode", *c.RegisterNode},
		{"crashLoopBackOff 300s (gate on)", c.CrashLoopBackOff.MaxContainerRestartPeriod != nil && c.CrashLoopBackOff.MaxContainerRestartPeriod.Duration == 300*time.Second},
		{"podLogsDir", c.PodLogsDir == "/var/log/pods"},
	} {
		if !d.ok {
			t.Errorf("default %s: not so", d.field)
		}
	}
	if err := Validate(c, ValidateOptions{}); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if err := Validate(c, ValidateOptions{CgroupV1: true}); err == nil || !strings.Contains(err.Error(), "cgroup v1") {
		t.Errorf("cgroup v1 host with failCgroupV1 defaulted to true: %v", err)
	}

	// Values that depend on others.
	if c := loaded(t, "nodeStatusUpdateFrequency: 20s\n"); c.NodeStatusReportFrequency.Duration != 20*time.Second {
		t.Errorf("report frequency %v, want the given update frequency", c.NodeStatusReportFrequency)
	}
	if c := loaded(t, "maxParallelImagePulls: 3\n"); *c.SerializeImagePulls {
		t.Error("maxParallelImagePulls 3 leaves serializeImagePulls true")
	}
	if c := loaded(t, "evictionHard: {memory.available: 1Gi}\n"); len(c.EvictionHard) != 1 {
		t.Errorf("a given evictionHard is merged without mergeDefaultEvictionSettings: %v", c.EvictionHard)
	}
	if c := loaded(t, "evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\n"); len(c.EvictionHard) != 5 || c.EvictionHard["memory.available"] != "1Gi" {
		t.Errorf("merged eviction: %v", c.EvictionHard)
	}
	if c := loaded(t, "featureGates: {KubeletCrashLoopBackOffMax: false}\n"); c.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		t.Error("crashLoopBackOff defaulted with its gate off")
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		opts      ValidateOptions
		want      []string // every message, in order
	}{
		{"numbers", "nodeLeaseDurationSeconds: -1\nmaxPods: -1\nport: 70000\nimageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n", ValidateOptions{}, []string{
			"invalid configuration: nodeLeaseDurationSeconds must be greater than 0",
			"invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50",
			"invalid configuration: maxPods (--max-pods) -1 must not be a negative number",
			"invalid configuration: port (--port) 70000 must be between 1 and 65535, inclusive",
		}},
		{"pulls", "serializeImagePulls: true\nmaxParallelImagePulls: 4\n", ValidateOptions{}, []string{
			"invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false",
		}},
		{"shutdown", "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", ValidateOptions{}, []string{
			"invalid configuration: shutdownGracePeriodCriticalPods {20s} must be <= shutdownGracePeriod {10s}",
		}},
		{"allocatable", "enforceNodeAllocatable: [pods, kube-reserved, none]\ncgroupsPerQOS: false\n", ValidateOptions{}, []string{
			`invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods" contained in enforceNodeAllocatable (--enforce-node-allocatable)`,
			`invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when "kube-reserved" or "kube-reserved-compressible" included in enforceNodeAllocatable (--enforce-node-allocatable)`,
			`invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when "kube-reserved" contained in enforceNodeAllocatable (--enforce-node-allocatable)`,
			`invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when "none" is specified`,
		}},
		{"logs", "containerLogMaxFiles: 1\npodLogsDir: logs/\n", ValidateOptions{}, []string{
			"invalid configuration: containerLogMaxFiles must be greater than 1",
			`invalid configuration: pod logs path "logs/" must be absolute path`,
			`invalid configuration: pod logs path "logs/" must be normalized`,
		}},
		{"cpuset", "reservedSystemCPUs: 0-99999999\n", ValidateOptions{}, []string{
			`invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) 0-99999999, error: range "0-99999999" has more than 65536 CPUs`,
		}},
		{"enums", "topologyManagerScope: node\nhairpinMode: loop\nlogging: {format: xml}\n", ValidateOptions{}, []string{
			`invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`,
			`invalid configuration: option "loop" specified for hairpinMode (--hairpin-mode). Valid options are "none", "hairpin-veth" or "promiscuous-bridge"`,
			`logging.format: Invalid value: "xml": Unsupported log format`,
		}},
		{"hidden metrics", "showHiddenMetricsForVersion: \"1.30\"\n", ValidateOptions{}, []string{
			`invalid showHiddenMetricsForVersion: showHiddenMetricsForVersion: Invalid value: "1.30": must be omitted or have the value '1.35'; only the previous minor version is allowed`,
		}},
		{"cgroup v1", "failCgroupV1: false\nsingleProcessOOMKill: false\n", ValidateOptions{CgroupV1: true}, []string{
			"invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1",
		}},
		{"unknown gate stops there", "featureGates: {NoSuchGate: true}\nmaxPods: -1\n", ValidateOptions{}, []string{
			"unrecognized feature gate: NoSuchGate",
		}},
		{"locked gate", "featureGates: {NodeSwap: false}\n", ValidateOptions{}, []string{
			"cannot set feature gate NodeSwap to false, feature is locked to true",
		}},
		{"gate dependencies", "featureGates: {GracefulNodeShutdown: false}\n", ValidateOptions{}, []string{
			"GracefulNodeShutdownBasedOnPodPriority is enabled, but depends on features that are disabled: [GracefulNodeShutdown]",
			"WindowsGracefulNodeShutdown is enabled, but depends on features that are disabled: [GracefulNodeShutdown]",
		}},
		{"json logging is the kubelet's", "logging: {format: json}\n", ValidateOptions{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(loaded(t, tc.doc), tc.opts)
			var got []string
			var inv *InvalidError
			if errors.As(err, &inv) {
				for _, e := range inv.Errors {
					got = append(got, e.Error())
				}
			} else if err != nil {
				t.Fatalf("error %v is no *InvalidError", err)
			}
			if len(tc.want) > 0 && !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) false")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestInvalidErrorMessage(t *testing.T) {
	err := &InvalidError{Errors: []error{errors.New("a"), errors.New("b")}}
	if got, want := err.Error(), "kubeletconfig: invalid configuration (2 problems):\n  - a\n  - b"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
