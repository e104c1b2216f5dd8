package registry

import (
	"context"

	"github.com/outboxd/outboxd/core/sink"
)

// The two tiny sink types every build has, for demos and tests. They take
// no options. Package sinks/builtin lists them with the other built-in
// types.
var (
	// Log logs each message at INFO through its environment's logger and
	// accepts it.
	Log = Define(TypeLog, "Logs each message at INFO and accepts it (demos, tests)", noOptions{}, newLog)
	// Discard accepts every message and drops it.
	Discard = Define(TypeDiscard, "Accepts every message and drops it (tests, benchmarks)", noOptions{}, newDiscard)
)

// The names of Log and Discard.
const (
	TypeLog     = "log"
	TypeDiscard = "discard"
)

// noOptions are the options of a type that takes none: any option is
// unknown.
type noOptions struct{}

func newLog(_ string, _ noOptions, env sink.Env) (sink.Func, error) {
	log := env.Logger // names the sink
	return func(ctx context.Context, d *sink.Delivery) error {
		log.InfoContext(ctx, "message delivered",
			"id", d.ID, "dedup_key", d.DedupKey, "attempt", d.Attempt, "payload", string(d.Payload))
		return nil
	}, nil
}

func newDiscard(string, noOptions, sink.Env) (sink.Func, error) {
	return func(context.Context, *sink.Delivery) error { return nil }, nil
}
