package apiserver_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/volumemgr/apiserver"
)

// The volume plugins read a pod's configMaps through Objects.
func Example() {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Data:       map[string]string{"mode": "prod"},
	})
	objs, _ := apiserver.New(client)
	cm, err := objs.ConfigMap(context.Background(), "default", "app")
	fmt.Println(cm.Data["mode"], err)
	_, err = objs.ConfigMap(context.Background(), "default", "missing")
	fmt.Println(err != nil)
	// Output:
	// prod <nil>
	// true
}
