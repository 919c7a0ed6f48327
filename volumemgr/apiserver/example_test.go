package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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

// Persisted keeps a copy of what it reads, for when the API server is gone.
func ExamplePersisted() {
	dir, _ := os.MkdirTemp("", "objects-")
	defer os.RemoveAll(dir)
	client := fake.NewClientset(&v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Data:       map[string][]byte{"password": []byte("s3cret")},
	})
	objs, _ := apiserver.NewPersisted(apiserver.PersistConfig{Client: client, Dir: dir})
	_, err := objs.Secret(context.Background(), "default", "db")
	fmt.Println(err)
	stored, _ := objs.Stored()
	fmt.Println(stored)
	fi, _ := os.Stat(filepath.Join(dir, apiserver.SecretsDir, "default_db"))
	fmt.Println(fi.Mode())
	// Output:
	// <nil>
	// [secret default/db]
	// -rw-------
}
