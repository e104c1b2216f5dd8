package core

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"
)

// Reconnect backoff of the LISTEN connection.
const (
	listenerReconnectInitial = 100 * time.Millisecond
	listenerReconnectMax     = 5 * time.Second
)

// ListenerApplicationName is the application_name of a relay's LISTEN
// connection, so operators can find it in pg_stat_activity.
const ListenerApplicationName = "outboxd-listener"

// pauseNotificationPrefix starts the payload of a notification that pauses a
// sink cluster-wide; an empty payload is an enqueue wake-up.
const pauseNotificationPrefix = "pause "

// listener keeps one connection LISTENing on the outbox's channel and fans
// wake-ups out to the relay's claim loops. It reconnects after the
// connection dies (pg_terminate_backend, a PostgreSQL restart) and then wakes
// everyone, since notifications sent while it was away are lost.
type listener struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger
	onPause func(sink string)

	mu      sync.Mutex
	waiters []chan struct{}
}

func newListener(pool *pgxpool.Pool, channel string, logger *slog.Logger, onPause func(string)) *listener {
	return &listener{pool: pool, channel: channel, logger: logger, onPause: onPause}
}

// subscribe returns a channel that receives a value whenever there may be
// new work. It holds at most one pending signal, so a burst of
// notifications costs one claim.
func (l *listener) subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	return ch
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (l *listener) run(ctx context.Context) {
	backoff := retry.WithCappedDuration(listenerReconnectMax, retry.NewExponential(listenerReconnectInitial))
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, func() {
			backoff = retry.WithCappedDuration(listenerReconnectMax, retry.NewExponential(listenerReconnectInitial))
		})
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

func (l *listener) listenOnce(ctx context.Context, onConnected func()) error {
	cfg := l.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	onConnected()
	// Anything enqueued while we were not listening was not announced.
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if sink, ok := strings.CutPrefix(n.Payload, pauseNotificationPrefix); ok {
			l.onPause(sink)
			continue
		}
		l.wakeAll()
	}
}
