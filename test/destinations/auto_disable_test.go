package destinations_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestDeadDestinationIsDisabledAndItsRowsWait runs outboxd serve with
// auto_disable_after 3s and a destination whose endpoint answers 503 to
// everything. Its breaker opens, and 3s later the relay disables it:
// the reason says why, its rows wait (parked, none dead), stats, the
// console and `outboxd stats` count them as waiting on a disabled
// destination, the audit trail has the relay's disable, and
// outboxd.destination.disabled reaches a second sink through the routes
// with the tenant, the destination, the reason and since when. Once the
// endpoint is up and the destination enabled, every row is delivered.
// Then a disabled destination's delete reports and audits the waiting
// rows that went with it.
//
// Mutations checked: making disableLongOpen skip every breaker leaves the
// destination enabled; dropping the parked CTE of
// destination_auto_disable leaves its rows unparked (not waiting, and
// their probes go on); publishing no event (PublishDisabled returning
// nil) leaves the ops receiver without it; counting waiting_disabled as
// 0 in take_stats_snapshot fails the stats checks; dropping the audit
// Write of disableDestination leaves no relay entry.
func TestDeadDestinationIsDisabledAndItsRowsWait(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "/deadco")
	o := serve(t, setup{poll: "200ms", options: "auto_disable_after: 3s",
		sinks:  fmt.Sprintf("  ops:\n    type: webhook\n    options: {url: %q, allow_private: true}\n", rcv.URL+"/ops"),
		routes: "  destination-news:\n    events: [\"outboxd.destination.disabled\"]\n    to:\n      - {sink: ops}\n"})
	dead := o.create(t, rcv, "deadco")
	const rows = 6
	for i := range rows {
		o.publishSQL(t, true, [3]string{"order.created", "deadco", fmt.Sprintf("d%d", i)})
	}

	var d destinations.Destination
	testrelay.WaitFor(t, deliveryTimeout, "the dead destination disabled", func() bool {
		o.call(t, http.MethodGet, "/v1/tenants/deadco/destinations/"+dead.ID, nil, &d)
		return !d.Enabled
	})
	if !strings.Contains(d.DisabledReason, "auto_disable_after (3s)") {
		t.Errorf("disabled reason %q does not say auto_disable_after", d.DisabledReason)
	}
	if d.Waiting == nil || *d.Waiting != rows {
		t.Errorf("disabled destination has %v waiting rows, want %d", d.Waiting, rows)
	}
	status := o.statusCounts(t, dead.ID)
	if status["dead"] != 0 || status["parked"] != rows {
		t.Errorf("the disabled destination's rows: %v, want all %d parked, none dead", status, rows)
	}

	var news struct {
		Type string
		Data struct {
			Sink, Tenant, Destination, Reason string
			LastFailure                       string `json:"last_failure"`
			Since                             time.Time
		}
	}
	testrelay.WaitFor(t, deliveryTimeout, "outboxd.destination.disabled at the ops sink", func() bool {
		for _, req := range rcv.requests("/ops") {
			if json.Unmarshal([]byte(req.body), &news) == nil && news.Type == "outboxd.destination.disabled" {
				return true
			}
		}
		return false
	})
	if n := news.Data; n.Sink != "customers" || n.Tenant != "deadco" || n.Destination != dead.ID || n.Reason != d.DisabledReason ||
		n.Since.IsZero() || !strings.Contains(n.LastFailure, "503") {
		t.Errorf("outboxd.destination.disabled's data: %+v", n)
	}

	if table := o.run(t, "stats"); !strings.Contains(table, fmt.Sprintf("%d waiting on disabled destinations", rows)) {
		t.Errorf("outboxd stats does not count the waiting rows:\n%s", table)
	}
	testrelay.WaitFor(t, deliveryTimeout, "GET /v1/stats and the console counting the waiting rows", func() bool {
		var stats struct {
			Sinks map[string]struct {
				WaitingDisabled int64 `json:"waiting_disabled"`
			}
		}
		o.call(t, http.MethodGet, "/v1/stats", nil, &stats)
		return stats.Sinks["customers"].WaitingDisabled == rows &&
			strings.Contains(o.page(t, "/"), fmt.Sprintf("%d (%d waiting on disabled destinations)", rows, rows))
	})
	var audit struct {
		Entries []struct {
			Action, Source string
			Count          int64
		}
	}
	o.call(t, http.MethodGet, "/v1/audit", nil, &audit)
	if e := audit.Entries; len(e) == 0 || e[0].Action != "destination_disable" || e[0].Source != "relay" || e[0].Count != rows {
		t.Errorf("audit trail's newest entries %+v, want the relay's destination_disable of %d rows", e, rows)
	}

	rcv.setDead("/deadco", false)
	if out := o.run(t, "destinations", "enable", dead.ID, "--tenant", "deadco"); !strings.Contains(out, fmt.Sprintf("(%d rows)", rows)) {
		t.Errorf("enable says %q, want the %d rows it made due", out, rows)
	}
	testrelay.WaitFor(t, deliveryTimeout, "every waiting row delivered once enabled", func() bool {
		delivered := map[string]bool{}
		for _, req := range rcv.requests("/deadco") {
			if !req.dead {
				delivered[req.body] = true
			}
		}
		// Delivered rows leave the table for the history at the next
		// maintenance; until then they are there, sent.
		for status := range o.statusCounts(t, dead.ID) {
			if status != "sent" {
				return false
			}
		}
		return len(delivered) == rows
	})

	o.run(t, "destinations", "disable", dead.ID, "--tenant", "deadco", "--reason", "leaving")
	o.publishSQL(t, true, [3]string{"order.created", "deadco", "late1"}, [3]string{"order.paid", "deadco", "late2"})
	if out := o.run(t, "destinations", "delete", dead.ID, "--tenant", "deadco", "--yes"); !strings.Contains(out, "waiting rows deleted with it (2 rows)") {
		t.Errorf("delete says %q, want the 2 waiting rows that went with it", out)
	}
	o.call(t, http.MethodGet, "/v1/audit", nil, &audit)
	if e := audit.Entries; len(e) == 0 || e[0].Action != "destination_delete" || e[0].Source != "cli" || e[0].Count != 2 {
		t.Errorf("audit trail's newest entries %+v, want the CLI's destination_delete of 2 rows", e)
	}
}

// requests returns every request to path, in order.
func (r *receiver) requests(path string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.got {
		if q.path == path {
			out = append(out, q)
		}
	}
	return out
}

// statusCounts counts destination id's rows by status, and as "parked"
// those waiting due at infinity.
func (o *outbox) statusCounts(t *testing.T, id string) map[string]int {
	t.Helper()
	rows, err := o.pool.Query(t.Context(), `SELECT CASE WHEN available_at = 'infinity' THEN 'parked' ELSE status::text END, count(*)
		FROM `+o.schema+`.messages WHERE headers->>'outboxd-destination' = $1 GROUP BY 1`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			t.Fatal(err)
		}
		out[status] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// page returns the body of a GET of path.
func (o *outbox) page(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(o.api + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
