// Package exshutdown gives the example agents the graceful node shutdown
// flags (--shutdown-grace-period, --shutdown-grace-period-critical-pods,
// --shutdown-on-sigterm) and their wiring (agentshutdown.Wire): with
// --shutdown-on-sigterm a SIGTERM shuts the node down gracefully (pods
// killed in the kubelet's groups and budgets) before the agent stops, as a
// machine without logind would ask it to before it powers off.
package exshutdown
