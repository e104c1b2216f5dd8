// Package apidb is the database of the HTTP API and the operator console:
// a pool of their own whose every statement has a statement timeout, the
// context deadline that backs it up, and how a query that ran out of time
// is told apart from other failures.
//
// The timeout is the server's (statement_timeout, a runtime parameter of
// the pool's connections), not only a context deadline: a statement
// waiting on a lock does not notice its client gave up, so a deadline
// alone would free the Go side while the backend went on holding its
// connection slot, and pgx closes a connection whose context expired
// mid-query. Cancelled by the server, the statement ends, its transaction
// rolls back, and the connection goes back to the pool ready for the next
// request. The setting lives on these connections only: the relay's pool
// and a producer's own connections (and so the enqueues in its
// transactions) never see it. It needs direct connections (or a pooler
// that passes startup parameters through).
package apidb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deadlineMargin is how much longer than the statement timeout a request's
// context lives: the server's cancellation comes first and leaves the
// connection usable, the deadline bounds what the server cannot (the wait
// for a free connection, a network that went silent).
const deadlineMargin = time.Second

// queryCanceled is the SQLSTATE of a statement the server cancelled,
// statement_timeout's among them (query_canceled).
const queryCanceled = "57014"

// Open returns a pool with base's settings whose connections cancel any
// statement running longer than timeout.
func Open(ctx context.Context, base *pgxpool.Pool, timeout time.Duration) (*pgxpool.Pool, error) {
	pc := base.Config() // a copy: base keeps its own runtime parameters
	pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(1, timeout.Milliseconds()), 10)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("api database pool: %w", err)
	}
	return pool, nil
}

// Context bounds the database work of one request made through a pool of
// Open with timeout.
func Context(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, timeout+deadlineMargin)
}

// TimedOut reports whether err is a query that ran out of time: cancelled
// by the server (statement_timeout) or by the request's deadline.
func TimedOut(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == queryCanceled
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Message tells a client that its request's query ran out of time, naming
// the setting that bounds it.
func Message(timeout time.Duration) string {
	return fmt.Sprintf("the database did not answer within %s (http.query_timeout): it is busy or a lock holds the rows; try again later", timeout)
}
