package kubeletconfig

import "errors"

var (
	// ErrDecode: the file is not a KubeletConfiguration that decodes
	// strictly (bad syntax, an unknown field, a duplicate key, a wrong
	// type); the wrapping error names the field or key.
	ErrDecode = errors.New("kubeletconfig: cannot decode")
	// ErrWrongKind: the document's apiVersion or kind is not
	// kubelet.config.k8s.io/v1beta1 KubeletConfiguration.
	ErrWrongKind = errors.New("kubeletconfig: not a kubelet.config.k8s.io/v1beta1 KubeletConfiguration")
	// ErrTooLarge: the file is over MaxFileSize, or nested deeper than
	// MaxDepth.
	ErrTooLarge = errors.New("kubeletconfig: too large")
	// ErrInvalid: the configuration does not validate as the kubelet's
	// does; the error is an *InvalidError listing every problem.
	ErrInvalid = errors.New("kubeletconfig: invalid configuration")
	// ErrCannotHonour: a field has a value the agent cannot run with (the
	// kubelet could); Apply reports every such field at once.
	ErrCannotHonour = errors.New("kubeletconfig: a value the agent cannot honour")
)
