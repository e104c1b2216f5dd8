package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestServeExitsWhenClaimsCannotSucceed: when the relay's claims fail for
// a reason no retry can fix (here the outbox schema is dropped under it),
// `serve` exits with a non-zero status and says why, instead of running on
// and delivering nothing. (Mutations: claimFailed never stopping the relay
// fails this test, serve keeps running; serve returning nil when Run
// fails fails it too, serve exits 0.)
func TestServeExitsWhenClaimsCannotSucceed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, webhookSink("partner", newReceiver(t)), "")
	e.mustRun("migrate")
	s := e.serve()
	eventually(t, 30*time.Second, "the relay to run", func() bool { return strings.Contains(s.Logs(), "relay running") })
	testdb.DropSchemaUnderLoad(t.Context(), t, e.pool, e.schema)
	eventually(t, 30*time.Second, "serve to exit", s.Exited)
	if err := s.Stop(); err == nil {
		t.Fatalf("serve exited 0 although its claims cannot succeed:\n%s", s.Logs())
	}
	if logs := s.Logs(); !strings.Contains(logs, "42P01") {
		t.Fatalf("serve's output does not name the missing relation (42P01):\n%s", logs)
	}
}
