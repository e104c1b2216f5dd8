package routing

import "github.com/outboxd/outboxd/core/sink"

// FieldThreadKey is the template field every sink type accepts that is not
// rendered at delivery: the database evaluates it when the event is
// published, to group the sink's rows into threads. It may hold only text,
// {{.type}}, {{.key}} and {{.data.path}}.
const FieldThreadKey = "thread_key"

// PayloadUpdateRoot is the payload field a rendered payload carries, set
// to true, for a target with update_root: true on a sink whose shape
// Threads.
const PayloadUpdateRoot = "update_root"

// shapeOf returns s's Shape: the one it declares (sink.Shaper), else the
// zero Shape of a custom sink.
func shapeOf(s sink.Sink) sink.Shape {
	if sh, ok := s.(sink.Shaper); ok {
		return sh.TemplateShape()
	}
	return sink.Shape{}
}

// fieldKind returns the kind of field in shape s, and whether s has it.
func fieldKind(s sink.Shape, field string) (sink.FieldKind, bool) {
	if s.Fields == nil {
		if field == sink.FieldBody {
			return sink.Body, true
		}
		return sink.Text, true
	}
	k, ok := s.Fields[field]
	return k, ok
}
