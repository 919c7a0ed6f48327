package nodekit

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

// A Builder given no logger still says what is wrong: warnings and errors
// reach standard error, nothing below.
func TestDefaultLoggerWritesWarnings(t *testing.T) {
	core := defaultLogger().Core()
	for lvl, want := range map[zapcore.Level]bool{
		zapcore.DebugLevel: false, zapcore.InfoLevel: false, zapcore.WarnLevel: true, zapcore.ErrorLevel: true,
	} {
		if got := core.Enabled(lvl); got != want {
			t.Errorf("default logger enabled at %v = %v, want %v", lvl, got, want)
		}
	}
}
