// Package kubeletconfig reads a kubelet configuration file
// (kubelet.config.k8s.io/v1beta1 KubeletConfiguration, the types of
// k8s.io/kubelet) for a nodekit agent, as the kubelet v1.36.3 reads its
// --config file:
//
//   - Decode and LoadFile decode it strictly with apimachinery's
//     serializers, YAML or JSON: an unknown field or a duplicate key is an
//     error naming it, and so is another apiVersion or kind. The file is
//     bounded before it is decoded (MaxFileSize, MaxDepth: a pod
//     manifest's bounds). LoadFile resolves the file's relative paths
//     against its directory, as the kubelet does.
//   - SetDefaults fills in the kubelet's defaults (its
//     SetDefaults_KubeletConfiguration, with the file's featureGates over
//     the kubelet's, and its loader's default evictionHard).
//   - Validate checks the result as the kubelet's
//     ValidateKubeletConfiguration does and returns every problem at once
//     (*InvalidError), worded as the kubelet words them.
//
// benchmarks/kubeletconfig (its own module, which imports the kubelet)
// checks that the defaults and the validation errors are the kubelet's on
// a table of files, and that the table of feature gates here is the
// kubelet's.
//
// Apply validates a configuration and maps it onto a nodekit.Builder
// (sync frequency, manifest directory and URL with their periods, pod logs
// directory, maxPods and podsPerCore at admission, image pull
// serialization, the runtime engine's timeouts, DNS, seccomp default and
// crash-loop back-off cap, and with Options.Runtime the CRI endpoint and
// container log rotation). The parts wired outside it (the node API
// server, a cluster, graceful shutdown, certificates) are Options.Parts:
// their fields are theirs. Every field set to a value other than the
// kubelet's default that nothing maps is named in one warning and ignored;
// a value the agent cannot honour is an error (ErrCannotHonour).
// Applied.Configz serves the effective configuration on /configz.
//
// Flags given on a command line override the file, as the kubelet's do:
// load the file, set the fields of the flags the user gave (flag.Visit),
// then validate.
//
//	f, err := kubeletconfig.LoadFile("/etc/nodekit/kubelet.yaml")
//	// ... override f.Config's fields from the flags given
//	if err := kubeletconfig.Validate(f.Config, kubeletconfig.ValidateOptions{}); err != nil {
//		return err // every problem, one per line
//	}
package kubeletconfig
