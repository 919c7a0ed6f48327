package deviceplugin

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrInvalidConfig is returned by New for a bad Config; the message
	// names the field.
	ErrInvalidConfig = errors.New("deviceplugin: invalid config")
	// ErrUnknownDevice: SetHealth named a device the plugin does not have.
	ErrUnknownDevice = errors.New("deviceplugin: unknown device")
	// ErrAlreadyRan: Run was called before on this value.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
