package exshutdown_test

import (
	"flag"
	"fmt"
	"os"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
	"github.com/nodekit/nodekit/examples/internal/exshutdown"
)

func Example() {
	var f exshutdown.Flags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f.Register(fs)
	_ = fs.Parse([]string{"--shutdown-on-sigterm"})
	_, err := f.Wire(nodekit.NewBuilder(), agentshutdown.Config{})
	fmt.Println(err)
	_ = fs.Parse([]string{"--shutdown-grace-period=30s", "--shutdown-grace-period-critical-pods=10s"})
	h, err := f.Wire(nodekit.NewBuilder(), agentshutdown.Config{})
	fmt.Println(h != nil, err, len(f.StopSignals()) == 1 && f.StopSignals()[0] == os.Interrupt)
	// Output:
	// --shutdown-on-sigterm needs --shutdown-grace-period
	// true <nil> true
}
