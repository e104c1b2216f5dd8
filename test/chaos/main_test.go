// Package chaos_test runs the outboxd binary as several real relay
// processes on one PostgreSQL cluster of its own, kills them at random,
// restarts the database underneath them and lets a misbehaving webhook
// receiver fail requests, then checks that nothing was lost, nothing
// rolled back was sent, and duplicates stayed within their bound.
//
// The default run takes seconds; OUTBOXD_CHAOS=full runs the full-size
// scenario (20,000 messages, minutes) that CI runs.
package chaos_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// binary is the outboxd binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }
