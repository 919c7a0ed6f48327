package apiserver

import (
	"errors"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/volumemgr"
)

var (
	_ volumemgr.ObjectSource      = (*Objects)(nil)
	_ volumemgr.TokenSource       = (*Objects)(nil)
	_ kuberuntime.EnvSourceGetter = (*Objects)(nil)
)

func TestObjects(t *testing.T) {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"p": []byte("x")}},
	)
	o, err := New(client)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := o.ConfigMap(t.Context(), "ns", "cfg")
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("ConfigMap = %v, %v", cm, err)
	}
	s, err := o.Secret(t.Context(), "ns", "sec")
	if err != nil || string(s.Data["p"]) != "x" {
		t.Fatalf("Secret = %v, %v", s, err)
	}
	for _, get := range []func() error{
		func() error { _, err := o.ConfigMap(t.Context(), "ns", "nope"); return err },
		func() error { _, err := o.Secret(t.Context(), "other", "sec"); return err },
	} {
		err := get()
		if !errors.Is(err, volumemgr.ErrObjectNotFound) || !apierrors.IsNotFound(err) {
			t.Errorf("missing object: %v, want ErrObjectNotFound and IsNotFound", err)
		}
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New(nil) = %v", err)
	}
}

func TestServiceAccountToken(t *testing.T) {
	client := fake.NewClientset()
	var got *authenticationv1.TokenRequest
	var gotSA string
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		got = ca.GetObject().(*authenticationv1.TokenRequest)
		gotSA = ca.(k8stesting.CreateActionImpl).Name
		out := got.DeepCopy()
		out.Status.Token = "tok"
		return true, out, nil
	})
	o, _ := New(client)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
	tok, err := o.ServiceAccountToken(t.Context(), pod, "vault", 600)
	if err != nil || tok != "tok" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	if gotSA != "default" || got.Spec.Audiences[0] != "vault" || *got.Spec.ExpirationSeconds != 600 ||
		got.Spec.BoundObjectRef.UID != "u1" || got.Spec.BoundObjectRef.Kind != "Pod" {
		t.Fatalf("request for %q: %+v", gotSA, got.Spec)
	}
}
