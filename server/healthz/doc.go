// Package healthz is the kubelet's /healthz: the checks (ping, log, the
// sync loop's, the PLEG's and any others), their answers ("ok", or 500
// naming the failed checks with the reasons withheld), and the plain-HTTP
// localhost health port (10248) that is tried again every 5 s when it
// cannot be opened. Package server serves it on its API too; an agent with
// no API serves it alone:
//
//	hz, err := healthz.New(healthz.Config{Checks: healthz.Checks{SyncLoop: loop.SyncLoopHealthy, PLEG: pleg.Healthy}})
//	go hz.Run(ctx)
package healthz
