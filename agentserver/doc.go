// Package agentserver wires package server's HTTPS API into a nodekit
// Agent with one call, the way clusterapiserver.Wire joins a cluster, so a
// minimal agent that does not call it does not link the server:
//
//	b := nodekit.NewBuilder().WithNodeName("node1").WithRuntimeEndpoint(ep).WithRootDir(root)
//	agentserver.Wire(b, agentserver.Config{Server: server.Config{
//		NodeName: "node1", ClientCA: pool, Authorizer: authz,
//		CertDir: filepath.Join(root, "pki"), HealthzPort: server.DefaultHealthzPort,
//	}})
//	agent, err := b.Build()
//
// Authentication and authorization against the API server (TokenReview,
// SubjectAccessReview) come from server/apiserver.
package agentserver
