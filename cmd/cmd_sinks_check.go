package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/server"
)

// sinkTestTimeout bounds `sinks test`'s check or test delivery.
const sinkTestTimeout = 30 * time.Second

// testMessagePrefix starts every field of a test message, so that whoever
// reads it at the destination knows to ignore it.
const testMessagePrefix = "[outboxd sinks test]"

func (a *app) sinkTestCommand() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "test NAME [--yes]",
		Short: "Check a sink's credentials or reachability without sending; or, with --yes, send it a marked test message",
		Long: `Builds the sink NAME from the configuration (its options and their
secrets are needed; the other sinks' are not read) and checks, without
delivering anything, that it
could deliver now: Slack's auth.test with the bot token, an SMTP
connection with EHLO, TLS and login, a broker connection (NATS with its
JetStream account, RabbitMQ with a confirming channel, Kafka's metadata).

A sink that cannot be checked without sending (a webhook, a Slack
incoming webhook, a custom sink without a check) is refused unless --yes
is given: then one test message, marked as such in every field, is
delivered to it directly (no row is stored). Exit 0: the sink works;
1: it does not (the error says why).`,
		Example: `  SLACK_BOT_TOKEN=xoxb-... outboxd sinks test ops-slack
  outboxd sinks test partner-webhook --yes`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeConfiguredSinkArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, err := a.configWith(config.DatabaseOnly, name)
			if err != nil {
				return err
			}
			if err := cfg.CheckSink(name); err != nil {
				return badInput(err)
			}
			sinks := cfg.SinkConfigs()
			sc := sinks[slices.IndexFunc(sinks, func(sc relay.SinkConfig) bool { return sc.Name == name })]
			log, err := a.logger()
			if err != nil {
				return err
			}
			defer server.CloseSinks(sinks, log)
			ctx, cancel := context.WithTimeout(cmd.Context(), sinkTestTimeout)
			defer cancel()
			out := cmd.OutOrStdout()
			if checker, ok := sc.Sink.(sink.Checker); ok {
				err := checker.Check(ctx)
				switch {
				case err == nil:
					fmt.Fprintf(out, "sink %s (%s): ok, checked without sending a message\n", terminalText(name), sc.Type)
					return nil
				case !errors.Is(err, sink.ErrCannotCheck):
					return &exitError{code: exitFailure, err: fmt.Errorf("sink %s (%s): check failed: %w", name, sc.Type, err)}
				}
			}
			if !yes {
				return badInputf("sink %s (%s) cannot be checked without sending a message: rerun with --yes to deliver one marked test message to it", name, sc.Type)
			}
			d := &sink.Delivery{Sink: name, DedupKey: fmt.Sprintf("outboxd-sinks-test-%d", time.Now().UnixNano()),
				Payload: testPayload(sc.Type, a.actor().Name), Attempt: 1, MaxAttempts: 1, CreatedAt: time.Now()}
			if err := sc.Sink.Deliver(ctx, d.WithContext(ctx)); err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("sink %s (%s): the test message failed: %w", name, sc.Type, err)}
			}
			fmt.Fprintf(out, "sink %s (%s): ok, delivered a test message (dedup key %s)\n", terminalText(name), sc.Type, d.DedupKey)
			return nil
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "deliver a marked test message to a sink that cannot be checked otherwise")
	return c
}

// testFields are the payload fields a test message fills when the sink
// type's shape has them as text: Slack's text, a mail's subject and text,
// a PagerDuty trigger's summary.
var testFields = []string{"subject", "text", "summary"}

// testPayload is the test message for a sink of type typ, by its shape:
// every field of testFields it has says what the message is; a sink whose
// payload is its whole body (a webhook, a custom sink) gets an object that
// does.
func testPayload(typ, by string) json.RawMessage {
	text := fmt.Sprintf("%s a test message from %s at %s: ignore it", testMessagePrefix, by, time.Now().UTC().Format(time.RFC3339))
	t, _ := registry.Lookup(typ)
	payload := map[string]any{}
	for _, field := range testFields {
		if kind, ok := t.Shape.Fields[field]; ok && kind == sink.Text {
			payload[field] = text
		}
	}
	if len(payload) == 0 {
		payload = map[string]any{"type": "outboxd.test", "outboxd_test": true, "message": text}
	}
	js, _ := json.Marshal(payload) // strings and a bool
	return js
}
