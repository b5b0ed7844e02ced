package kafka

import (
	"reflect"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// events is the table of event types, read once from the Envelope's
// `event` oneof: an event type is the name of its case, so a new event is
// a change of the .proto alone, and every list of types (HeaderType's
// values, `shoal replay --type`, the replay's JSON) follows it.
var events = newEventTable()

type eventTable struct {
	oneof protoreflect.OneofDescriptor
	names []string          // in the order of the .proto
	known map[string]string // each name, to itself: a lookup of header bytes that does not allocate
	// byCase is the name of each case's Go type (eventspb.Envelope_Publish,
	// …): a lookup a few times faster than protoreflect's WhichOneof, for
	// the record of every event.
	byCase map[reflect.Type]string
}

func newEventTable() eventTable {
	od := (&eventspb.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("event")
	n := od.Fields().Len()
	t := eventTable{oneof: od, known: make(map[string]string, n), byCase: make(map[reflect.Type]string, n)}
	for i := range n {
		fd := od.Fields().Get(i)
		name := string(fd.Name())
		t.names = append(t.names, name)
		t.known[name] = name
		env := &eventspb.Envelope{}
		m := env.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		t.byCase[reflect.TypeOf(env.Event)] = name
	}
	return t
}

// EventTypes returns every event type, in the order of the Envelope's
// oneof. The slice is the caller's.
func EventTypes() []string { return append([]string(nil), events.names...) }

// EnvelopeType returns the event type of env, "" when it has no event
// (or env is nil: a record without an envelope, a tombstone). It does not
// allocate.
func EnvelopeType(env *eventspb.Envelope) string {
	if env.GetEvent() == nil {
		return ""
	}
	return events.byCase[reflect.TypeOf(env.Event)]
}

// EventBody returns the event's own message (the oneof's case), nil when
// env has none.
func EventBody(env *eventspb.Envelope) protoreflect.ProtoMessage {
	if env.GetEvent() == nil {
		return nil
	}
	m := env.ProtoReflect()
	fd := m.WhichOneof(events.oneof)
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().Interface()
}

// EventType returns r's HeaderType header, "" when it has none. Known types
// are returned without allocating.
func EventType(r *Record) string {
	v := r.Header(HeaderType)
	if name, ok := events.known[string(v)]; ok {
		return name
	}
	return string(v)
}
