// Package listener keeps one connection LISTENing for an outbox's
// notifications and fans wake-ups out to the relay's claim loops.
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

	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
)

// Reconnect backoff of the LISTEN connection.
const (
	reconnectInitial = 100 * time.Millisecond
	reconnectMax     = 5 * time.Second
)

// ApplicationName is the application_name of a relay's LISTEN connection,
// so operators can find it in pg_stat_activity.
const ApplicationName = "outboxd-listener"

// Listener is one relay's LISTEN connection. It listens on the outbox's
// channel, which every relay hears (pauses, and wake-ups for all), and on
// each subscribed loop's own channel, which only that loop hears (wake-ups
// a producer addressed to it). It reconnects after the connection dies
// (pg_terminate_backend, a PostgreSQL restart), then reloads the pauses and
// wakes everyone, since notifications sent while it was away (a resume
// among them) are lost.
type Listener struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger
	reload  func()

	mu    sync.Mutex
	subs  []subscription
	ready chan struct{} // closed once LISTEN first succeeded
	once  sync.Once
}

type subscription struct {
	own  string // the loop's own channel, or ""
	wake chan struct{}
}

// New listens on channel with a connection configured like pool's; reload
// is called on each pause notification, and after every successful
// (re)connect before the loops are woken: it loads the pauses the database
// has, which a lost notification may have changed.
func New(pool *pgxpool.Pool, channel string, logger *slog.Logger, reload func()) *Listener {
	return &Listener{pool: pool, channel: channel, logger: logger, reload: reload, ready: make(chan struct{})}
}

// Subscribe returns a channel that receives a value whenever there may be
// new work: on every wake-up for all, and on notifications on own (a
// channel name; "" for none). It holds at most one pending signal, so a
// burst of notifications costs one claim. Subscribe before Run: own is
// listened to from Run's first connection on.
func (l *Listener) Subscribe(own string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.subs = append(l.subs, subscription{own: own, wake: ch})
	l.mu.Unlock()
	return ch
}

// Ready is closed once the listener first LISTENs on every channel.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// wake signals every subscription whose own channel is channel, or every
// subscription when channel is "".
func (l *Listener) wake(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.subs {
		if channel != "" && s.own != channel {
			continue
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// WakeAll wakes every subscription, as a notification for all would.
func (l *Listener) WakeAll() { l.wake("") }

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

// listenStatement LISTENs on the outbox's channel and every loop's own.
func (l *Listener) listenStatement() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	stmts := []string{"LISTEN " + pgx.Identifier{l.channel}.Sanitize()}
	for _, s := range l.subs {
		if s.own != "" {
			stmts = append(stmts, "LISTEN "+pgx.Identifier{s.own}.Sanitize())
		}
	}
	return strings.Join(stmts, "; ")
}

func (l *Listener) listenOnce(ctx context.Context, onConnected func()) error {
	cfg := l.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, l.listenStatement()); err != nil {
		return err
	}
	onConnected()
	// A pause or a resume while we were not listening was not announced
	// either: reload them before the loops look at them.
	l.reload()
	l.once.Do(func() { close(l.ready) })
	relaysignal.FromContext(ctx).EmitListening()
	// Anything enqueued while we were not listening was not announced.
	l.wake("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch {
		case n.Channel != l.channel:
			l.wake(n.Channel)
		case strings.HasPrefix(n.Payload, store.PausePrefix):
			l.reload()
		default:
			l.wake("")
		}
	}
}
