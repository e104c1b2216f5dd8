package pgerr_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/core/internal/pgerr"
)

// A statement refused with an ERROR rolled back; one whose session ended
// (FATAL), whose connection broke or whose wait was cut short may have
// committed. (Mutation: OutcomeUnknown true for every PostgreSQL error
// fails the ERROR case; false for every one fails the FATAL case.)
func TestOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"refused", fmt.Errorf("claim: %w", &pgconn.PgError{SeverityUnlocalized: "ERROR", Code: "40001"}), false},
		{"session ended", fmt.Errorf("claim: %w", &pgconn.PgError{SeverityUnlocalized: "FATAL", Code: "57P01"}), true},
		{"localized only", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"connection broke", fmt.Errorf("claim: %w", io.ErrUnexpectedEOF), true},
		{"wait cut short", context.Canceled, true},
	} {
		if got := pgerr.OutcomeUnknown(c.err); got != c.want {
			t.Errorf("%s: OutcomeUnknown(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
