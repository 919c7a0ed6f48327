// Package exlog is the example agents' console logger. It is a package of
// its own so that examples/standalone, whose binary size is budgeted, does
// not link client-go through exutil.
package exlog
