package connretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/core/internal/connretry"
)

// Do retries a statement whose connections were ended as many times in a
// row as the pool holds connections, and once more, without waiting (an
// hour's backoff would outlast the test's deadline), and stops at the
// first error a retry cannot get past. Mutations: the completer's former
// schedule (one retry at once, then backing off) fails the first part;
// retrying every error fails the second.
func TestDoRetriesEndedConnectionsAtOnceAndStopsAtAPermanentError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ended := fmt.Errorf("outbox: finish: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01"})
	calls := 0
	got, err := connretry.Do(ctx, time.Hour, time.Hour, 2, func(context.Context) (string, error) {
		calls++
		if calls <= 3 {
			return "", ended
		}
		return "written", nil
	})
	if err != nil || got != "written" || calls != 4 {
		t.Fatalf("three ended connections: got %q, %v after %d calls, want \"written\" after 4", got, err, calls)
	}

	refused := fmt.Errorf("outbox: finish: %w", &pgconn.PgError{Severity: "ERROR", Code: "22P05"})
	calls = 0
	_, err = connretry.Do(ctx, time.Hour, time.Hour, 2, func(context.Context) (string, error) {
		calls++
		return "", refused
	})
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("a permanent error: %v after %d calls, want it after 1", err, calls)
	}
}

// A pool of 2 connections: failures on open connections (a session ended
// by pg_terminate_backend) are retried at once 3 times in a row, then
// back off; a failure to connect backs off at once. Mutations: ignoring
// the error (every failure backs off) fails the first three; retrying
// every failure at once fails the connect error's.
func TestPooledRetriesEndedConnectionsAtOnceAndBacksOffFromAnAbsentDatabase(t *testing.T) {
	t.Parallel()
	ended := fmt.Errorf("outbox: claim: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01"})
	refused := fmt.Errorf("outbox: claim: %w", &pgconn.ConnectError{})
	if !errors.As(refused, new(*pgconn.ConnectError)) {
		t.Fatal("the test's connect error is not one")
	}
	p := connretry.NewPooled(10*time.Millisecond, 35*time.Millisecond, 2)
	steps := []struct {
		err  error
		want time.Duration
	}{
		{ended, 0}, {ended, 0}, {ended, 0},
		{ended, 10 * time.Millisecond}, {refused, 20 * time.Millisecond}, {ended, 35 * time.Millisecond},
	}
	for i, s := range steps {
		if got := p.Next(s.err); got != s.want {
			t.Fatalf("retry %d after %v: waits %v, want %v", i+1, s.err, got, s.want)
		}
	}
	fresh := connretry.NewPooled(10*time.Millisecond, 35*time.Millisecond, 2)
	if got := fresh.Next(refused); got != 10*time.Millisecond {
		t.Errorf("a failure to connect first: waits %v, want 10ms", got)
	}
}
