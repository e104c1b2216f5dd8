// Package destinations_test runs `outboxd serve` with a sink of type
// destinations against PostgreSQL and real HTTP receivers: tenants'
// destinations created through the API while the relay runs, events
// published by SQL and HTTP in transactions, signatures verified by the
// official standardwebhooks npm package.
package destinations_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// binary is the outboxd binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }
