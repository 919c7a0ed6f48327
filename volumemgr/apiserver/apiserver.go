package apiserver

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/volumemgr"
)

// Objects reads objects from the API server. It satisfies
// volumemgr.ObjectSource, volumemgr.TokenSource and kuberuntime.EnvSourceGetter.
type Objects struct {
	client kubernetes.Interface
}

// New returns Objects over client. It does no I/O.
func New(client kubernetes.Interface) (*Objects, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	}
	return &Objects{client: client}, nil
}

// ConfigMap gets a configMap. A missing one gives an error matching both
// volumemgr.ErrObjectNotFound and apierrors.IsNotFound.
func (o *Objects) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	cm, err := o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(err, "configmap", namespace, name)
	}
	return cm, nil
}

// Secret gets a secret, with the same not-found rule as ConfigMap.
func (o *Objects) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	s, err := o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(err, "secret", namespace, name)
	}
	return s, nil
}

// ServiceAccountToken requests a token for the pod's service account, bound
// to the pod (TokenRequest), for a projected serviceAccountToken source.
func (o *Objects) ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (string, error) {
	if pod == nil {
		return "", fmt.Errorf("%w: no pod", ErrInvalidConfig)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	resp, err := o.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("volumemgr/apiserver: token for serviceaccount %s/%s: %w", pod.Namespace, sa, err)
	}
	if resp.Status.Token == "" {
		return "", fmt.Errorf("volumemgr/apiserver: empty token for serviceaccount %s/%s", pod.Namespace, sa)
	}
	return resp.Status.Token, nil
}

func wrap(err error, kind, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %s/%s: %w", volumemgr.ErrObjectNotFound, kind, namespace, name, err)
	}
	return fmt.Errorf("volumemgr/apiserver: %s %s/%s: %w", kind, namespace, name, err)
}
