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
