package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/server/console"
)

// The overview's sink row shows an open circuit breaker (its state, since
// when and why, the last failure and the next probe), and the row's
// resume closes it for the cluster.
// (Mutations, each failing this test: stateText without its breaker case
// (the row said "running"); breakersText without the next probe.)
func TestOverviewShowsTheBreakerAndResumeClosesIt(t *testing.T) {
	s := newSite(t, console.Options{})
	// A breaker as a relay opens it (breaker_open.sql).
	if _, err := s.pool.Exec(s.ctx, "INSERT INTO "+s.ob.Schema()+".destination_breakers (sink, reason, last_failure, probe_interval, next_probe_at) "+
		"VALUES ('partner', '5 consecutive failures (destination down)', 'HTTP 503 Service Unavailable', '5s', now() + interval '5s')"); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	resp, body := b.Get("/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	for _, want := range []string{"circuit breaker open since", "5 consecutive failures (destination down)",
		"last failure: HTTP 503 Service Unavailable", "next probe", "state-circuit-open"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
	if resp, _ := b.Post("/sinks/partner/resume", url.Values{"csrf": {b.CSRF}, "by": {"erin"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d, want 303", resp.StatusCode)
	}
	open, err := s.ob.Breakers(s.ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 0 {
		t.Errorf("breakers after the console's resume: %+v", open)
	}
	// The resume invalidates the overview's cache: the next one reads anew.
	if _, body = b.Get("/"); strings.Contains(body, "circuit breaker open") {
		t.Error("the overview still shows the breaker open after the resume")
	}
}
