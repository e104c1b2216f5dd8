package server

import (
	"fmt"
	"log/slog"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
)

// newConsole builds the operator console of cfg; db is the API's pool
// (apidb.Open with cfg.HTTP.QueryTimeout); dests manages tenants'
// destinations, links signs the tenant portal's links (nil: no portal).
func newConsole(cfg *config.Config, ops *operator.Operator, db audit.DB, sinks []relay.SinkConfig, log *slog.Logger,
	dests *destinations.Store, links *portal.Links) (*console.Console, error) {
	return console.New(console.Options{Operator: ops, DB: db, QueryTimeout: cfg.HTTP.QueryTimeout, Sinks: consoleSinks(sinks), Access: cfg.HTTP.Authenticator(),
		TraceURL: cfg.Telemetry.TraceURL, Logger: log, Destinations: dests, Portal: links, TestEventSink: cfg.TestEventSink(), EventTypes: cfg.EventTypes()})
}

// consoleSinks is what the console may show of the configured sinks: name,
// type and rate limit, never their options (which hold the secrets).
func consoleSinks(sinks []relay.SinkConfig) []console.Sink {
	out := make([]console.Sink, 0, len(sinks))
	for _, s := range sinks {
		cs := console.Sink{Name: s.Name, Type: s.Type}
		rl := s.RateLimit
		if d, ok := s.Sink.(sink.RateLimitDefaulter); ok && rl == nil {
			def := d.DefaultRateLimit() // what the relay applies, too
			rl = &def
		}
		if rl != nil {
			burst := rl.Burst
			if burst == 0 {
				burst = relay.DefaultRateBurst
			}
			cs.RateLimit = fmt.Sprintf("%d per %s, burst %d", rl.Rate, rl.Per, burst)
		}
		out = append(out, cs)
	}
	return out
}
