package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/telemetry"
)

// The HTTP server's limits.
const (
	// ReadHeaderTimeout bounds how long a client may take to send headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds how long a client may take to send a whole
	// request, so that one trickling its body (a slowloris) cannot hold a
	// connection: time for api.MaxRequestBodyBytes at 1 Mbit/s, and then
	// some.
	ReadTimeout = 20 * time.Second
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the answer: its body, the handler's database work, the response.
	WriteTimeout = 60 * time.Second
	// IdleTimeout closes a kept-alive connection that carries no request
	// for this long; longer than the idle timeouts of common load
	// balancers, so that they, not we, close it.
	IdleTimeout = 120 * time.Second
	// HTTPShutdownTimeout bounds how long in-flight API requests may take
	// to finish after SIGTERM.
	HTTPShutdownTimeout = 10 * time.Second
)

// newMux is what the daemon serves for the API a: a's endpoints, the
// metrics at api.MetricsPath and, when set, the operator console (with
// its own sign-in) at everything else, all behind the API's guards.
func newMux(a *api.API, metrics, console http.Handler) http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	api.RegisterOpen(mux, api.MetricsPath, metrics)
	if console != nil {
		mux.Handle("/", console)
	}
	return a.Guard(mux)
}

// startHTTP listens at once, so /healthz answers and /readyz reports the
// database's state while serve waits for it, and returns a function that
// shuts the server down gracefully; onShutdown runs as the shutdown
// starts (it ends the console's live streams, which would hold it up).
func startHTTP(ctx context.Context, listen string, h http.Handler, log *slog.Logger, onShutdown func()) (func(), error) {
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
