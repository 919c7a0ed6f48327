package exlog_test

import (
	"fmt"

	"github.com/nodekit/nodekit/examples/internal/exlog"
)

func ExampleNew() {
	quiet, verbose := exlog.New(false), exlog.New(true)
	fmt.Println(quiet.Core().Enabled(-1), quiet.Core().Enabled(1), verbose.Core().Enabled(0))
	// Output: false true true
}
