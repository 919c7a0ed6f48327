// Package apiserver authenticates and authorizes the requests of package
// server against the Kubernetes API server, as the kubelet does with
// k8s.io/apiserver's delegating factories: x509 client certificates
// verified against a client CA file (the API server's kubelet-client
// certificate), bearer tokens through TokenReview (answers cached 2
// minutes), and SubjectAccessReview for every check (allowed answers
// cached 5 minutes, denied 30 seconds), with the API server's webhook
// retry back-off. It also gives server.WebSocketStreams with the API
// server's WebSocket translators. It is the only part of the server that
// imports client-go and k8s.io/apiserver.
//
//	auth, err := apiserver.New(apiserver.Config{Client: client,
//		ClientCAFile: "/etc/kubernetes/pki/ca.crt", TokenWebhook: true})
//	srv, err := server.New(server.Config{..., Authenticator: auth.Authenticator,
//		Authorizer: auth.Authorizer, ClientCA: auth.ClientCA,
//		WebSocketStreams: apiserver.WebSocketStreams{}})
//
// The client CA file is read once by New (the kubelet reloads it when it
// changes).
package apiserver
