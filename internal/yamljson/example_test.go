package yamljson_test

import (
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/internal/yamljson"
)

func ExampleConvert() {
	in := []byte(`
kind: Pod
metadata: {name: web, labels: &l {app: web}}
spec:
  hostNetwork: yes
  priority: 0x10
  containers:
  - name: app
    args: [--port, "8080"]
extra: *l
`)
	js, err := yamljson.Convert(in, yamljson.Limits{MaxDepth: 100, MaxNodes: 1000, MaxOutput: 4 * len(in)})
	fmt.Println(string(js), err)

	_, err = yamljson.Convert([]byte("a: !!str 1\n"), yamljson.Limits{})
	fmt.Println(errors.Is(err, yamljson.ErrUnsupported))

	_, err = yamljson.Convert([]byte("[[[[a]]]]"), yamljson.Limits{MaxDepth: 3})
	fmt.Println(err)
	// Output:
	// {"kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"hostNetwork":true,"priority":16,"containers":[{"name":"app","args":["--port","8080"]}]},"extra":{"app":"web"}} <nil>
	// true
	// yamljson: too deep: line 1: more than 3 levels
}
