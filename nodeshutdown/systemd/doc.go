// Package systemd starts a node's graceful shutdown (package nodeshutdown)
// the way the kubelet does on systemd machines: it holds a logind delay
// inhibitor lock for shutdowns over D-Bus and, when logind signals
// PrepareForShutdown(true), runs the shutdown and then releases the lock,
// so the machine powers off only once the pods are done (or their budgets
// spent).
//
//	sd := agentshutdown.Wire(b, agentshutdown.Config{
//		Shutdown: nodeshutdown.Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second},
//		Watchers: []agentshutdown.Watcher{systemd.Watcher(systemd.Config{})},
//	})
//
// Setup, as the kubelet's: read logind's InhibitDelayMaxUSec; when it is
// below the shutdown's period (the sum of the groups' budgets), write a
// drop-in (DropInDir/DropInName, /etc/systemd/logind.conf.d/99-nodekit.conf:
// "[Login]" "InhibitDelayMaxSec=N"), have systemd send systemd-logind
// SIGHUP (KillUnit) so it reloads, and read the property again up to five
// times, 100 ms to 800 ms apart; still too small is ErrInhibitDelay and no
// lock is taken. Then Inhibit("shutdown", Who, Why, "delay") and subscribe
// to PrepareForShutdown. PrepareForShutdown(false) (a cancelled shutdown)
// makes the node ready again and takes a new lock.
//
// Run retries every ReconnectPeriod (1 s) when the bus goes away or the
// setup fails; on a machine without a system bus it logs the first
// failure and goes on trying quietly, leaving the agent running. It
// releases the lock when it returns.
//
// Only this package links github.com/godbus/dbus/v5: an agent that does
// not use it (firmware calling agentshutdown's Handle.Shutdown itself)
// carries no D-Bus code. Conn is the part of *dbus.Conn it uses, so tests
// can give a fake connection (Config.Connect).
package systemd
