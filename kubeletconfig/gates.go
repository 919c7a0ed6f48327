package kubeletconfig

import (
	"fmt"
	"sort"
)

// gateSpec is one of the kubelet's feature gates (gates_generated.go).
type gateSpec struct {
	name   string
	def    bool
	locked bool
	stage  string // "ALPHA", "BETA", "" (GA), "DEPRECATED", "PRE-ALPHA"
}

// The gates ValidateKubeletConfiguration and SetDefaults_KubeletConfiguration
// look at.
const (
	gateCustomCPUCFSQuotaPeriod                = "CustomCPUCFSQuotaPeriod"
	gateImageMaximumGCAge                      = "ImageMaximumGCAge"
	gateRotateKubeletServerCertificate         = "RotateKubeletServerCertificate"
	gateGracefulNodeShutdown                   = "GracefulNodeShutdown"
	gateGracefulNodeShutdownBasedOnPodPriority = "GracefulNodeShutdownBasedOnPodPriority"
	gateNodeSwap                               = "NodeSwap"
	gateKubeletCrashLoopBackOffMax             = "KubeletCrashLoopBackOffMax"
	gateKubeletEnsureSecretPulledImages        = "KubeletEnsureSecretPulledImages"
	gateMemoryQoS                              = "MemoryQoS"
	gateNodeLogQuery                           = "NodeLogQuery"
	gateLoggingAlphaOptions                    = "LoggingAlphaOptions"
	gateLoggingBetaOptions                     = "LoggingBetaOptions"
)

// gates is the kubelet's feature gate set with a configuration's
// featureGates applied.
type gates struct {
	known   map[string]gateSpec
	enabled map[string]bool
}

// newGates applies set to the kubelet's defaults as its feature gate does
// (component-base's SetFromMap): an unknown name is an error (and stops
// there), a locked gate set to the other value is an error, AllAlpha and
// AllBeta set every alpha or beta gate not named, and an enabled gate whose
// dependencies are disabled is an error. The gates are usable (defaults
// plus what could be set) even when errors are returned.
func newGates(set map[string]bool) (*gates, []error) {
	g := &gates{known: map[string]gateSpec{}, enabled: map[string]bool{}}
	for _, s := range knownGates() {
		g.known[s.name] = s
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := g.known[n]; !ok {
			return g, []error{fmt.Errorf("unrecognized feature gate: %s", n)}
		}
	}
	var errs []error
	// AllAlpha and AllBeta first, so a gate named explicitly wins.
	for _, special := range []struct{ name, stage string }{{"AllAlpha", "ALPHA"}, {"AllBeta", "BETA"}} {
		v, ok := set[special.name]
		if !ok {
			continue
		}
		for name, s := range g.known {
			if _, named := set[name]; !named && s.stage == special.stage && !s.locked {
				g.enabled[name] = v
			}
		}
	}
	for _, n := range names {
		s, v := g.known[n], set[n]
		switch {
		case s.locked && s.def != v:
			errs = append(errs, fmt.Errorf("cannot set feature gate %v to %v, feature is locked to %v", n, v, s.def))
		case s.stage == "PRE-ALPHA":
			errs = append(errs, fmt.Errorf("cannot set feature gate %v to %v, feature is PreAlpha", n, v))
		default:
			g.enabled[n] = v
		}
	}
	if len(errs) > 0 {
		return g, errs
	}
	deps := gateDependencies()
	dnames := make([]string, 0, len(deps))
	for n := range deps {
		dnames = append(dnames, n)
	}
	sort.Strings(dnames)
	for _, n := range dnames {
		if !g.Enabled(n) {
			continue
		}
		var off []string
		for _, d := range deps[n] {
			if !g.Enabled(d) {
				off = append(off, d)
			}
		}
		if len(off) > 0 {
			errs = append(errs, fmt.Errorf("%s is enabled, but depends on features that are disabled: %v", n, off))
		}
	}
	return g, errs
}

// Enabled says whether the named gate is on.
func (g *gates) Enabled(name string) bool {
	if v, ok := g.enabled[name]; ok {
		return v
	}
	return g.known[name].def
}

// defaultGates are the kubelet's gates with set applied, errors ignored
// (for defaulting, which the kubelet does before it validates).
func defaultGates(set map[string]bool) *gates {
	g, _ := newGates(set)
	return g
}
