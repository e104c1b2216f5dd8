package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
)

// Service is one of the relay's duties beside its claim loops. Start
// begins it in the background and returns; it runs until ctx ends or Stop
// is called. Stop ends it and returns once it has finished what it was
// doing; it may be called more than once, and before Start.
type Service interface {
	Start(ctx context.Context)
	Stop()
}

// Env is what every service works with: the relay's pool and statements,
// its logger and its test signals.
type Env struct {
	DB      *pgxpool.Pool
	Q       *store.Queries
	Logger  *slog.Logger
	Signals *relaysignal.Relay // nil outside tests
}

// runner is the Start and Stop every service shares: it runs one function
// in a goroutine until the context Start was given ends or Stop is called.
type runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run(ctx') in the background, ctx' ending with ctx or at stop.
// A second start before stop is ignored: a service runs once at a time.
func (r *runner) start(ctx context.Context, run func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		run(ctx)
	}(r.done)
}

// Stop ends what start began and waits for it.
func (r *runner) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	r.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// every calls round at once and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, round func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// afterElection waits until leader's first election is over (or ctx
// ends) and then calls round every interval while leader leads: the
// cluster's chores, done once by one relay.
func afterElection(ctx context.Context, leader *Leader, interval time.Duration, round func(ctx context.Context)) {
	select {
	case <-ctx.Done():
		return
	case <-leader.Elected():
	}
	every(ctx, interval, func(ctx context.Context) {
		if leader.Leading() {
			round(ctx)
		}
	})
}
