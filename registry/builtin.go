package registry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/core/sink"
)

// The two tiny sink types every build has, for demos and tests. They take
// no options. Package sinks/builtin registers them with the other
// built-in types.
var (
	// Log logs each message at INFO with slog.Default and accepts it.
	Log = Type{Name: TypeLog, New: newLog, Doc: "Logs each message at INFO and accepts it (demos, tests)"}
	// Discard accepts every message and drops it.
	Discard = Type{Name: TypeDiscard, New: newDiscard, Doc: "Accepts every message and drops it (tests, benchmarks)"}
)

// The names of Log and Discard.
const (
	TypeLog     = "log"
	TypeDiscard = "discard"
)

func newLog(_ string, options map[string]any) (sink.Sink, error) {
	if err := noOptions(options); err != nil {
		return nil, err
	}
	return sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		slog.Default().InfoContext(ctx, "message delivered",
			"sink", d.Sink, "id", d.ID, "dedup_key", d.DedupKey,
			"attempt", d.Attempt, "payload", string(d.Payload))
		return nil
	}), nil
}

func newDiscard(_ string, options map[string]any) (sink.Sink, error) {
	if err := noOptions(options); err != nil {
		return nil, err
	}
	return sink.Func(func(context.Context, *sink.Delivery) error { return nil }), nil
}

func noOptions(options map[string]any) error {
	if len(options) > 0 {
		return fmt.Errorf("takes no options, got %s", strings.Join(slices.Sorted(maps.Keys(options)), ", "))
	}
	return nil
}
