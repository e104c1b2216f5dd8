package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd"
)

type publishFlags struct {
	typ, key, data, file   string
	orderingKey, threadKey string
}

func (a *app) publishCommand() *cobra.Command {
	var f publishFlags
	c := &cobra.Command{
		Use:   "publish --type T --key K --data JSON | --file F",
		Short: "Publish an event through the routes applied to the database, or JSON lines of events from a file",
		Long: `Publish an event: the routes applied to the database (outboxd migrate or
outboxd routes apply store plugins.yaml's) turn it into one row per target,
and the relay renders each with its route's template. Prints one line per
row, "created <sink> <id>" or "duplicate <sink> <id>" (the same type and
key were published before); a row of a target with a tenant adds what its
fan-out made, "fan-out to tenant <t>: <n> rows", and says so when the
tenant has no destination subscribed to the type (0 rows: nothing is
sent). An event no route matches fails (exit 2),
unless the routes say routes_unmatched: drop.

With --file, reads JSON lines {"type", "key", "data", "ordering_key",
"thread_key"} (- for stdin): every line is first checked by the database,
in transactions rolled back, so that a bad line stores nothing; then the
events are published in batches. A rerun after a failure is safe: events
already stored come back as duplicates.

A TRACEPARENT (and TRACESTATE) environment variable continues the caller's
trace: the delivery spans become part of it.`,
		Example: `  outboxd publish --type order.created --key order-42 --data '{"id": 42}'
  outboxd routes test --type order.created --data '{"id": 42}'   # see where it would go first
  outboxd publish --file events.jsonl`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			switch {
			case f.file != "" && (f.typ != "" || f.key != "" || f.data != "" || f.orderingKey != "" || f.threadKey != ""):
				return badInputf("publish: --file takes no other flag; each line carries its event")
			case f.file == "" && (f.typ == "" || f.key == ""):
				return badInputf("publish: --type and --key are required (or --file)")
			case f.data != "" && !json.Valid([]byte(f.data)):
				return badInputf("publish: --data is not valid JSON")
			}
			return nil
		},
		RunE: a.withConfiguredDB(func(cmd *cobra.Command, s session) error {
			ctx := traceContextFromEnv(cmd.Context(), a.io.Env)
			if f.file != "" {
				return a.publishFile(ctx, cmd, s, f.file)
			}
			ev := outboxd.Event{Type: f.typ, Key: f.key, OrderingKey: f.orderingKey, ThreadKey: f.threadKey}
			if f.data != "" {
				ev.Data = json.RawMessage(f.data)
			}
			published, err := s.ob.Publish(ctx, s.pool, ev)
			if err != nil {
				return publishError(err)
			}
			printPublished(cmd.OutOrStdout(), ev, published)
			return nil
		}),
	}
	c.Flags().StringVar(&f.typ, "type", "", "event `type`, a dotted name (order.created)")
	c.Flags().StringVar(&f.key, "key", "", "the event's idempotency `key`")
	c.Flags().StringVar(&f.data, "data", "", "the event's data, a `JSON` object (default {})")
	c.Flags().StringVar(&f.orderingKey, "ordering-key", "", "deliver to each sink in order with other events of this `key`")
	c.Flags().StringVar(&f.threadKey, "thread-key", "", "post as one conversation with other events of this `key` (Slack threads)")
	c.Flags().StringVar(&f.file, "file", "", "JSON lines `file` of events to publish in batches; - reads stdin")
	return c
}

// printPublished prints one line per row of a published event, or says
// that the routes dropped it; a row of a target with a tenant says what
// its fan-out made (outboxd.Published.FanOut), and when it made nothing, why.
func printPublished(w io.Writer, ev outboxd.Event, published []outboxd.Published) {
	if len(published) == 0 {
		fmt.Fprintf(w, "dropped %s/%s: no route matches it (routes_unmatched: drop)\n", terminalText(ev.Type), terminalText(ev.Key))
		return
	}
	for _, p := range published {
		word := "duplicate"
		if p.Created {
			word = "created"
		}
		f := p.FanOut
		switch {
		case f == nil:
			fmt.Fprintln(w, word, p.Sink, p.ID)
		case f.Note() != "":
			fmt.Fprintf(w, "%s %s %d: fan-out to tenant %s: 0 rows (%s)\n", word, p.Sink, p.ID, terminalCell(f.Tenant), f.Note())
		default:
			fmt.Fprintf(w, "%s %s %d: fan-out to tenant %s: %d rows\n", word, p.Sink, p.ID, terminalCell(f.Tenant), f.Destinations)
		}
	}
}

// publishError makes a refused event the user's to fix (exit 2).
func publishError(err error) error {
	if errors.Is(err, outboxd.ErrInvalidEvent) || errors.Is(err, outboxd.ErrNoRoute) {
		return badInput(err)
	}
	return err
}
