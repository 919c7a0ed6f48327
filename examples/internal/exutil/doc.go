// Package exutil holds what the example agents share: the client
// configuration from a kubeconfig or flags, and the live pod table.
package exutil
