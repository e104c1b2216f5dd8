// Package listener keeps one connection LISTENing on an outbox's
// notification channel and fans wake-ups out to the relay's claim loops.
package listener

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"

	"github.com/outboxd/outboxd/internal/testsignal"
)

// Reconnect backoff of the LISTEN connection.
const (
	reconnectInitial = 100 * time.Millisecond
	reconnectMax     = 5 * time.Second
)

// ApplicationName is the application_name of a relay's LISTEN connection,
// so operators can find it in pg_stat_activity.
const ApplicationName = "outboxd-listener"

// PausePrefix starts the payload of a notification that pauses a sink
// cluster-wide ("pause <sink>"); an empty payload is an enqueue wake-up.
const PausePrefix = "pause "

// Listener is one relay's LISTEN connection. It reconnects after the
// connection dies (pg_terminate_backend, a PostgreSQL restart) and then
// wakes everyone, since notifications sent while it was away are lost.
type Listener struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger
	onPause func(sink string)

	mu      sync.Mutex
	waiters []chan struct{}
}

// New listens on channel with a connection configured like pool's; onPause
// is called with the sink of each pause notification.
func New(pool *pgxpool.Pool, channel string, logger *slog.Logger, onPause func(sink string)) *Listener {
	return &Listener{pool: pool, channel: channel, logger: logger, onPause: onPause}
}

// Subscribe returns a channel that receives a value whenever there may be
// new work. It holds at most one pending signal, so a burst of
// notifications costs one claim.
func (l *Listener) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	return ch
}

func (l *Listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Run listens until ctx is done, reconnecting with backoff.
func (l *Listener) Run(ctx context.Context) {
	newBackoff := func() retry.Backoff {
		return retry.WithCappedDuration(reconnectMax, retry.NewExponential(reconnectInitial))
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, func() { backoff = newBackoff() })
		if ctx.Err() != nil {
			return
		}
		wait, _ := backoff.Next()
		l.logger.Warn("outbox listener lost its connection; reconnecting", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (l *Listener) listenOnce(ctx context.Context, onConnected func()) error {
	cfg := l.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	onConnected()
	testsignal.FromContext(ctx).EmitListening()
	// Anything enqueued while we were not listening was not announced.
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if sink, ok := strings.CutPrefix(n.Payload, PausePrefix); ok {
			l.onPause(sink)
			continue
		}
		l.wakeAll()
	}
}
