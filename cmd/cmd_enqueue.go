package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/propagation"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/server/telemetry"
)

// Environment variables through which a non-Go producer hands its W3C trace
// context to `outboxd enqueue`.
const (
	traceParentEnv = "TRACEPARENT"
	traceStateEnv  = "TRACESTATE"
)

type enqueueFlags struct {
	sink, key, orderingKey string
	text, payload, file    string
	// destination addresses one tenant's destination (a sink of type
	// destinations), as enqueue_destination() does.
	destination string
}

func (a *app) enqueueCommand() *cobra.Command {
	var f enqueueFlags
	c := &cobra.Command{
		Use:   "enqueue --sink NAME --key KEY [--destination ID] (--text T | --payload JSON | --file F)",
		Short: "Enqueue one message, or JSON lines from a file (- for stdin) in batches",
		Long: `Enqueue one message and print "created <id>" or "duplicate <id>", or, with
--file, read JSON lines {"sink","dedup_key","payload","ordering_key"} (--sink
fills in a missing sink) and enqueue them in batches, printing the counts of
created and duplicate messages at the end. Every line is checked before any
is stored: a bad line (not one JSON object, an unknown sink, a payload the
database cannot store) exits with code 2 naming it, and nothing is
enqueued. A rerun after a database failure is safe: lines already stored
are reported as duplicates.

--destination sends the one message to one tenant's destination (its id,
dst_...) through --sink, a sink of type destinations, as the SQL function
enqueue_destination() does: the row waits while the destination is
disabled, and an unknown destination exits with code 2.

A TRACEPARENT (and TRACESTATE) environment variable continues the caller's
trace: the delivery spans become part of it.`,
		Example: `  outboxd enqueue --sink ops-slack --key deploy-4711 --text "Deploy 4711 finished"
  outboxd enqueue --sink partner-webhook --key order-42 --payload '{"order": 42}'
  outboxd enqueue --sink customers --destination dst_... --key welcome --payload '{"hello": "acme"}'
  outboxd enqueue --file messages.jsonl`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			given := 0
			for _, s := range []string{f.text, f.payload, f.file} {
				if s != "" {
					given++
				}
			}
			switch {
			case given != 1:
				return badInputf("enqueue: give exactly one of --text, --payload or --file")
			case f.file != "" && f.key != "":
				return badInputf("enqueue: --key does not go with --file; each line carries its dedup_key")
			case f.file != "" && f.destination != "":
				return badInputf("enqueue: --destination does not go with --file; it addresses one message")
			case f.file == "" && (f.sink == "" || f.key == ""):
				return badInputf("enqueue: --sink and --key are required")
			}
			return nil
		},
		RunE: a.withConfiguredDB(func(cmd *cobra.Command, s session) error {
			stop, err := a.countEnqueues(cmd.Context(), &s)
			if err != nil {
				return err
			}
			defer stop()
			ctx := traceContextFromEnv(cmd.Context(), a.io.Env)
			if f.file != "" {
				return a.enqueueFile(ctx, cmd, s, f)
			}
			return enqueueOne(ctx, cmd, s, f)
		}),
	}
	c.Flags().StringVar(&f.sink, "sink", "", "configured `sink` name (with --file: the default for lines without one)")
	_ = c.RegisterFlagCompletionFunc("sink", a.completeSinks)
	c.Flags().StringVar(&f.key, "key", "", "dedup `key`, unique per sink")
	c.Flags().StringVar(&f.destination, "destination", "", "the `id` of one tenant's destination to send the message to (--sink of type destinations)")
	c.Flags().StringVar(&f.orderingKey, "ordering-key", "", "deliver in order with other messages of this `key`")
	c.Flags().StringVar(&f.text, "text", "", "a `text` payload, stored as {\"text\": T}")
	c.Flags().StringVar(&f.payload, "payload", "", "`JSON` payload")
	c.Flags().StringVar(&f.file, "file", "", "JSON lines `file` to enqueue in batches; - reads stdin")
	return c
}

// traceContextFromEnv continues the trace named by TRACEPARENT, so that
// Enqueue stores it in the row's headers.
func traceContextFromEnv(ctx context.Context, env config.LookupEnv) context.Context {
	carrier := propagation.MapCarrier{}
	for header, name := range map[string]string{"traceparent": traceParentEnv, "tracestate": traceStateEnv} {
		if v, ok := env(name); ok && v != "" {
			carrier[header] = v
		}
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

func enqueueOne(ctx context.Context, cmd *cobra.Command, s session, f enqueueFlags) error {
	if err := checkSink(s.cfg, f.sink); err != nil {
		return err
	}
	var payload any = f.text
	if f.payload != "" {
		if !json.Valid([]byte(f.payload)) {
			return badInputf("enqueue: --payload is not valid JSON")
		}
		payload = json.RawMessage(f.payload)
	}
	msg := outboxd.Message{Sink: f.sink, DedupKey: f.key, Payload: payload, OrderingKey: f.orderingKey}
	var (
		res outboxd.EnqueueResult
		err error
	)
	if f.destination != "" {
		if err := s.cfg.CheckDestinationSink(f.sink); err != nil {
			return badInputf("enqueue: --sink: %w", err)
		}
		res, err = s.ob.EnqueueDestination(ctx, s.pool, f.destination, msg)
	} else {
		res, err = s.ob.Enqueue(ctx, s.pool, msg)
	}
	if err != nil {
		return enqueueError(err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), resultWord(res), res.ID)
	return nil
}

func resultWord(res outboxd.EnqueueResult) string {
	if res.Created {
		return "created"
	}
	return "duplicate"
}

// enqueueError makes invalid messages the user's to fix (exit 2).
func enqueueError(err error) error {
	if errors.Is(err, outboxd.ErrInvalidMessage) {
		return badInput(err)
	}
	return err
}

// countEnqueues gives the CLI's outbox a meter provider, so that the
// outbox.enqueues of `outboxd enqueue` (a backfill, say) reach the OTLP
// collector when one is configured; they are pushed when the returned stop
// runs, as the command ends. Without an endpoint nothing leaves the
// process.
func (a *app) countEnqueues(ctx context.Context, s *session) (func(), error) {
	log, err := a.logger()
	if err != nil {
		return nil, err
	}
	tel, err := telemetry.New(ctx, s.cfg.Telemetry, a.io.Env)
	if err != nil {
		return nil, err
	}
	if err := s.countWith(tel.MeterProvider); err != nil {
		return nil, err
	}
	return func() { tel.Flush(ctx, log) }, nil
}

// checkSink reports a sink name the configuration does not know, as the
// user's to fix.
func checkSink(cfg *config.Config, name string) error { return badInputIf(cfg.CheckSink(name)) }
