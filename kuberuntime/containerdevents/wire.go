package containerdevents

import (
	"fmt"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The few containerd messages this package speaks, encoded by hand so that
// the containerd module is not a dependency. Field numbers are those of
// containerd's api (services/events/v1/events.proto, types/event.proto and
// events/task.proto); the wire format is the same in containerd 1.6, 1.7
// and 2.x.

// subscribeMethod is the full gRPC method name of Events.Subscribe.
const subscribeMethod = "/containerd.services.events.v1.Events/Subscribe"

// Topics and Any type names of the events this package decodes.
const (
	TopicExit = "/tasks/exit"
	TopicOOM  = "/tasks/oom"

	typeTaskExit = "containerd.events.TaskExit"
	typeTaskOOM  = "containerd.events.TaskOOM"
)

// rawMessage is a message already in wire format; rawCodec passes it
// through gRPC untouched.
type rawMessage []byte

// rawCodec is the gRPC codec of the watcher's calls: requests and
// responses are *rawMessage, encoded and decoded by this package. Its name
// is "proto", so the content type is the one containerd expects.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawMessage)
	if !ok {
		return nil, fmt.Errorf("%w: codec cannot marshal %T", ErrMalformed, v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*m)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("%w: codec cannot unmarshal into %T", ErrMalformed, v)
	}
	*m = data.Materialize()
	return nil
}

// encodeSubscribe encodes SubscribeRequest{filters = 1}.
func encodeSubscribe(filters []string) []byte {
	var b []byte
	for _, f := range filters {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, f)
	}
	return b
}

// envelope is containerd's event envelope.
type envelope struct {
	Timestamp time.Time
	Namespace string
	Topic     string
	TypeURL   string
	Value     []byte
}

// taskExit is containerd.events.TaskExit.
type taskExit struct {
	ContainerID string
	ID          string
	Pid         uint32
	ExitStatus  uint32
	ExitedAt    time.Time
}

// field is one decoded field: its number, and either its varint value or
// its bytes.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

// walk calls fn for every field of the message b. Fields of other wire
// types than varint and bytes are skipped; fn sees only those two.
func walk(b []byte, what string, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: bad tag: %v", ErrMalformed, what, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %s: field %d: %v", ErrMalformed, what, num, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// want checks that a known field has the wire type its schema gives it.
func (f field) want(what string, typ protowire.Type) error {
	if f.typ != typ {
		return fmt.Errorf("%w: %s: field %d has wire type %d, want %d", ErrMalformed, what, f.num, f.typ, typ)
	}
	return nil
}

// decodeTimestamp decodes google.protobuf.Timestamp{seconds=1, nanos=2}.
func decodeTimestamp(b []byte) (time.Time, error) {
	var secs, nanos int64
	err := walk(b, "Timestamp", func(f field) error {
		switch f.num {
		case 1:
			secs = int64(f.varint)
			return f.want("Timestamp.seconds", protowire.VarintType)
		case 2:
			nanos = int64(int32(f.varint))
			return f.want("Timestamp.nanos", protowire.VarintType)
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if nanos < 0 || nanos >= int64(time.Second) {
		return time.Time{}, fmt.Errorf("%w: Timestamp: nanos %d out of range", ErrMalformed, nanos)
	}
	if secs == 0 && nanos == 0 {
		return time.Time{}, nil
	}
	return time.Unix(secs, nanos), nil
}

// decodeEnvelope decodes Envelope{timestamp=1, namespace=2, topic=3,
// event=4 (google.protobuf.Any{type_url=1, value=2})}.
func decodeEnvelope(b []byte) (envelope, error) {
	var e envelope
	err := walk(b, "Envelope", func(f field) error {
		switch f.num {
		case 1:
			if err := f.want("Envelope.timestamp", protowire.BytesType); err != nil {
				return err
			}
			t, err := decodeTimestamp(f.bytes)
			e.Timestamp = t
			return err
		case 2:
			e.Namespace = string(f.bytes)
			return f.want("Envelope.namespace", protowire.BytesType)
		case 3:
			e.Topic = string(f.bytes)
			return f.want("Envelope.topic", protowire.BytesType)
		case 4:
			if err := f.want("Envelope.event", protowire.BytesType); err != nil {
				return err
			}
			return walk(f.bytes, "Any", func(f field) error {
				switch f.num {
				case 1:
					e.TypeURL = string(f.bytes)
					return f.want("Any.type_url", protowire.BytesType)
				case 2:
					e.Value = f.bytes
					return f.want("Any.value", protowire.BytesType)
				}
				return nil
			})
		}
		return nil
	})
	return e, err
}

// decodeTaskExit decodes TaskExit{container_id=1, id=2, pid=3,
// exit_status=4, exited_at=5}.
func decodeTaskExit(b []byte) (taskExit, error) {
	var x taskExit
	err := walk(b, "TaskExit", func(f field) error {
		switch f.num {
		case 1:
			x.ContainerID = string(f.bytes)
			return f.want("TaskExit.container_id", protowire.BytesType)
		case 2:
			x.ID = string(f.bytes)
			return f.want("TaskExit.id", protowire.BytesType)
		case 3:
			x.Pid = uint32(f.varint)
			return f.want("TaskExit.pid", protowire.VarintType)
		case 4:
			x.ExitStatus = uint32(f.varint)
			return f.want("TaskExit.exit_status", protowire.VarintType)
		case 5:
			if err := f.want("TaskExit.exited_at", protowire.BytesType); err != nil {
				return err
			}
			t, err := decodeTimestamp(f.bytes)
			x.ExitedAt = t
			return err
		}
		return nil
	})
	return x, err
}

// decodeTaskOOM decodes TaskOOM{container_id=1} and returns the id.
func decodeTaskOOM(b []byte) (string, error) {
	var id string
	err := walk(b, "TaskOOM", func(f field) error {
		if f.num == 1 {
			id = string(f.bytes)
			return f.want("TaskOOM.container_id", protowire.BytesType)
		}
		return nil
	})
	return id, err
}

// typeName is the message name of an Any's type URL: what follows the last
// '/' ("type.googleapis.com/containerd.events.TaskExit" and
// "containerd.events.TaskExit" both give the latter).
func typeName(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}
