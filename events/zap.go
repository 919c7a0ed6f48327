package events

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ZapConfig configures a Zap recorder.
type ZapConfig struct {
	// Logger receives one line per event (default zap.NewNop()).
	Logger *zap.Logger
	// WarningsAtWarn logs Warning events at the Warn level (default: every
	// event at Info, as the kubelet logs its events).
	WarningsAtWarn bool
}

// Zap is an EventRecorder that writes one structured line per event:
// message "Event occurred" with the fields object (kind, namespace, name,
// uid, fieldPath), type, reason and message. It never blocks longer than
// the logger's write.
type Zap struct {
	log  *zap.Logger
	warn bool
}

// NewZap returns a Zap recorder.
func NewZap(cfg ZapConfig) (*Zap, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Zap{log: cfg.Logger, warn: cfg.WarningsAtWarn}, nil
}

// Event logs the event.
func (z *Zap) Event(obj runtime.Object, typ, reason, message string) {
	z.write(obj, typ, reason, message)
}

// Eventf logs the event with the formatted message.
func (z *Zap) Eventf(obj runtime.Object, typ, reason, messageFmt string, args ...any) {
	if !z.log.Core().Enabled(z.level(typ)) {
		return
	}
	z.write(obj, typ, reason, format(messageFmt, args))
}

func (z *Zap) level(typ string) zapcore.Level {
	if z.warn && typ == v1.EventTypeWarning {
		return zapcore.WarnLevel
	}
	return zapcore.InfoLevel
}

func (z *Zap) write(obj runtime.Object, typ, reason, message string) {
	ce := z.log.Check(z.level(typ), "Event occurred")
	if ce == nil {
		return
	}
	e, err := makeEvent(obj, typ, reason, message, time.Time{})
	if err != nil {
		z.log.Warn("event about an object without a reference dropped", zap.String("reason", reason), zap.Error(err))
		return
	}
	ce.Write(
		zap.Dict("object",
			zap.String("kind", e.Object.Kind),
			zap.String("namespace", e.Object.Namespace),
			zap.String("name", e.Object.Name),
			zap.String("uid", string(e.Object.UID)),
			zap.String("fieldPath", e.Object.FieldPath),
		),
		zap.String("type", typ),
		zap.String("reason", reason),
		zap.String("message", message),
	)
}
