// Package pgerr classifies PostgreSQL errors for the relay: which ones a
// retry of the same statement can get past, and how to name one in a log
// or a stored message.
package pgerr

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// transientClasses are the SQLSTATE classes of errors that running the
// same statement again can get past: the connection (08), a transaction
// rolled back for a conflict (40), resources (53), an operator or a
// restart (57) and system errors (58). Every other error PostgreSQL
// reports (a data exception, class 22, above all) would fail the same way
// every time.
var transientClasses = map[string]bool{"08": true, "40": true, "53": true, "57": true, "58": true}

// IsTransient reports whether retrying the same statement may succeed:
// errors that are not PostgreSQL's (the network, a timeout) and the
// transient classes.
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !errors.Is(err, context.Canceled)
	}
	return len(pgErr.Code) == 5 && transientClasses[pgErr.Code[:2]]
}

// deadlockDetected is PostgreSQL's SQLSTATE deadlock_detected.
const deadlockDetected = "40P01"

// IsDeadlock reports whether err is PostgreSQL choosing this transaction
// as a deadlock's victim: it was rolled back whole, and running it again
// usually gets through.
func IsDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == deadlockDetected
}

// OutcomeUnknown reports whether a statement that failed with err may
// still have run to its commit: the statement was sent and then the
// connection was lost (PostgreSQL ended the session with a FATAL or PANIC
// report, the network failed, the caller's context cut the wait short)
// before its answer came. A statement that was never sent, or that
// PostgreSQL refused with an ERROR (its transaction rolled back), did
// not commit.
func OutcomeUnknown(err error) bool {
	if err == nil || pgconn.SafeToRetry(err) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		severity := pgErr.SeverityUnlocalized
		if severity == "" { // servers before 9.6 send the localized one only
			severity = pgErr.Severity
		}
		return severity == "FATAL" || severity == "PANIC"
	}
	return true
}

// ConnectFailed reports whether err is a failure to open a connection:
// the database is away, or refuses new sessions (starting up, shutting
// down, out of connections). Any other failure happened on a connection
// that had been open, and another one may work at once.
func ConnectFailed(err error) bool {
	var connect *pgconn.ConnectError
	return errors.As(err, &connect)
}

// SQLState names err's SQLSTATE for a stored message, without its text
// (which may quote the refused data).
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "SQLSTATE " + pgErr.Code
	}
	return "not a PostgreSQL error"
}

// Describe is err for the log: PostgreSQL's message, its SQLSTATE and
// where in the statement, so the real cause is visible rather than the
// context deadline it would otherwise end in.
func Describe(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s (SQLSTATE %s%s)", pgErr.Message, pgErr.Code, detail(pgErr))
	}
	return err.Error()
}

func detail(e *pgconn.PgError) string {
	if e.Where == "" {
		return ""
	}
	return "; " + e.Where
}
