package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/telemetry"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
)

// IsLoopback reports whether listen, a host:port, is a loopback address.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	return err == nil && isLoopbackHost(host)
}

// HTTPShutdownTimeout bounds how long in-flight API requests may take to
// finish after SIGTERM.
const HTTPShutdownTimeout = 10 * time.Second

// Start listens at once, so /healthz answers and /readyz reports the
// database's state while serve waits for it, and returns a function that
// shuts the server down gracefully; onShutdown runs as the shutdown
// starts (it ends the console's live streams, which would hold it up).
func Start(ctx context.Context, listen string, h http.Handler, log *slog.Logger, onShutdown func()) (func(), error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(onShutdown)
	log.Info("http api listening", "addr", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http api stopped", telemetry.ErrAttr(err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HTTPShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http api shutdown", telemetry.ErrAttr(err))
		}
		<-done
	}, nil
}

// NewConsole builds the operator console of cfg; db is the API's pool
// (apidb.Open with cfg.HTTP.QueryTimeout); dests manages tenants'
// destinations, portal signs the tenant portal's links (nil: no portal).
func NewConsole(cfg *config.Config, ops *operator.Operator, db audit.DB, sinks []relay.SinkConfig, log *slog.Logger,
	dests *destinations.Store, portal *console.PortalLinks) (*console.Console, error) {
	return console.New(console.Options{Operator: ops, DB: db, QueryTimeout: cfg.HTTP.QueryTimeout, Sinks: consoleSinks(sinks), Access: cfg.HTTP.Authenticator(),
		TraceURL: cfg.Telemetry.TraceURL, Logger: log, Destinations: dests, Portal: portal, TestEventSink: testEventSink(sinks)})
}

// testEventSink is the sink test events go through: the first, by name,
// of type destinations ("" for none).
func testEventSink(sinks []relay.SinkConfig) string {
	var names []string
	for _, s := range sinks {
		if s.Type == sinkdest.Type {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return slices.Min(names)
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
