package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/routing"
)

// defaultTestKey is the event key of `routes test` without --key.
const defaultTestKey = "routes-test"

// routesTestReport is `routes test -o json`.
type routesTestReport struct {
	Event     sink.Event        `json:"event"`
	Targets   []routing.Reached `json:"targets"`
	Unmatched string            `json:"unmatched,omitempty"` // what publish does with an event no route matches
}

func (a *app) routesTestCommand() *cobra.Command {
	var (
		o     output
		ev    sink.Event
		data  string
		route string
	)
	c := &cobra.Command{
		Use:   "test --type T [--key K] [--data JSON] [--route R] [-o table|json]",
		Short: "Show which targets an event reaches and each rendered payload, storing nothing",
		Long: `Routes an event through the configuration's routes as publish() would, and
prints every target it reaches with the payload rendered by the target's
template, or the error that would dead-letter it. Nothing is stored and
no database is needed. The routes are the configuration's: outboxd routes
apply makes them the ones publish() uses. An event no route matches is
reported with what publish would do (routes_unmatched).`,
		Example: `  outboxd routes test --type order.created --data '{"id": 42, "total": "9.90"}'
  outboxd routes test --type order.shipped --key order-42 --route shipping -o json`,
		Args: cobra.NoArgs,
		PreRunE: checkOutput(&o, func(*cobra.Command, []string) error {
			if ev.Type == "" {
				return badInputf("routes test: --type is required")
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(data), &obj); err != nil || obj == nil {
				return badInputf("routes test: --data is not a JSON object")
			}
			ev.Data = json.RawMessage(data)
			// Published now, as far as a template or an envelope can
			// tell (created_at, a webhook's "timestamp"), to the
			// microsecond the database stores.
			ev.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
			return nil
		}),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config(config.DatabaseOnly)
			if err != nil {
				return err
			}
			if route != "" && !slices.Contains(cfg.RouteTable().Routes(), route) {
				return badInputf("routes test: no route named %q (routes: %v)", route, cfg.RouteTable().Routes())
			}
			reached, err := cfg.RouteTable().Route(ev)
			if err != nil {
				return badInputf("routes test: %w", err)
			}
			if route != "" {
				reached = slices.DeleteFunc(reached, func(r routing.Reached) bool { return r.Route != route })
			}
			report := routesTestReport{Event: ev, Targets: reached}
			if len(reached) == 0 {
				report.Unmatched = cfg.RouteTable().Unmatched()
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), report)
			}
			return writeRoutesTest(cmd.OutOrStdout(), report)
		},
	}
	c.Flags().StringVar(&ev.Type, "type", "", "the event's `type`, a dotted name (order.created)")
	c.Flags().StringVar(&ev.Key, "key", defaultTestKey, "the event's `key`")
	c.Flags().StringVar(&data, "data", "{}", "the event's data, a `JSON` object")
	c.Flags().StringVar(&route, "route", "", "show only this `route`'s targets")
	_ = c.RegisterFlagCompletionFunc("route", a.completeRoutes)
	addOutputFlags(c, &o, `{"event", "targets": [{"route", "sink", "payload", "error"}]}`)
	return c
}

func writeRoutesTest(w io.Writer, r routesTestReport) error {
	if len(r.Targets) == 0 {
		what := "publish fails (routes_unmatched: error)"
		if r.Unmatched == routing.UnmatchedDrop {
			what = "publish stores nothing (routes_unmatched: drop)"
		}
		_, err := fmt.Fprintf(w, "no route matches %s: %s\n", terminalText(r.Event.Type), what)
		return err
	}
	for _, t := range r.Targets {
		fmt.Fprintf(w, "route %s -> sink %s\n", terminalText(t.Route), terminalText(t.Sink))
		if t.Error != "" {
			fmt.Fprintf(w, "  rendering fails (the row would be dead-lettered): %s\n", terminalText(t.Error))
			continue
		}
		fmt.Fprintln(w, indent(terminalText(prettyJSON(t.Payload)), "  "))
	}
	return nil
}
