package apiserver_test

import (
	"fmt"

	"github.com/nodekit/nodekit/server/apiserver"
)

// Webhook authorization needs a client; AlwaysAllow must be chosen.
func Example() {
	_, err := apiserver.New(apiserver.Config{})
	fmt.Println(err)
	auth, err := apiserver.New(apiserver.Config{AuthorizationMode: apiserver.ModeAlwaysAllow})
	fmt.Printf("%T %v\n", auth.Authorizer, err)
	// Output:
	// server/apiserver: invalid config: Client is required for Webhook authorization
	// server.AlwaysAllow <nil>
}
