package connretry_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/core/internal/connretry"
)

// The first retry is immediate, the next ones double from initial up to
// max. Mutation: returning initial for the first retry (the old schedule)
// makes this fail.
func TestScheduleRetriesAtOnceThenBacksOff(t *testing.T) {
	t.Parallel()
	b := connretry.New(10*time.Millisecond, 35*time.Millisecond)
	want := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	for i, w := range want {
		got, stop := b.Next()
		if stop || got != w {
			t.Fatalf("retry %d: got %v (stop %v), want %v", i+1, got, stop, w)
		}
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
