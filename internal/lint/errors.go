package lint

import "errors"

// ErrNoModule is returned by FindModuleRoot when no go.mod is found.
var ErrNoModule = errors.New("lint: no go.mod found")
