package exconfig

import (
	"flag"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Given is the set of flags given on the command line.
type Given map[string]bool

// GivenFlags returns the flags of fs that were set (flag.Visit).
func GivenFlags(fs *flag.FlagSet) Given {
	g := Given{}
	fs.Visit(func(f *flag.Flag) { g[f.Name] = true })
	return g
}

// String makes the flag and the field agree: a given flag sets the field
// (the flag wins), otherwise the field sets the flag's variable.
func (g Given) String(name string, flagVar, field *string) {
	if g[name] {
		*field = *flagVar
	} else {
		*flagVar = *field
	}
}

// Int is String for an int flag and an int32 field.
func (g Given) Int(name string, flagVar *int, field *int32) {
	if g[name] {
		*field = int32(*flagVar)
	} else {
		*flagVar = int(*field)
	}
}

// Bool is String for a bool flag and a *bool field (nil reads as false).
func (g Given) Bool(name string, flagVar *bool, field **bool) {
	if g[name] || *field == nil {
		v := *flagVar
		*field = &v
	} else {
		*flagVar = **field
	}
}

// Duration is String for a duration flag and field.
func (g Given) Duration(name string, flagVar *time.Duration, field *metav1.Duration) {
	if g[name] {
		field.Duration = *flagVar
	} else {
		*flagVar = field.Duration
	}
}
