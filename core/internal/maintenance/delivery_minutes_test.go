package maintenance_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/core/status"
)

// The delivery counts are added to delivery_minutes by sink and outcome;
// a row put off (pending) and an unknown sink count nothing, and Stop
// flushes what is left, so a relay's last deliveries are counted too. A
// row for a tenant's destination is counted for the destination as well,
// in destination_minutes (the portal's figures).
//
// Mutations checked: Start not flushing when it stops fails this test
// (nothing is counted: the interval is an hour); flush not writing the
// destinations' counts fails it (no row for dst_a).
func TestDeliveryMinutesCountOutcomesAndFlushAtStop(t *testing.T) {
	b, env := setup(t)
	m := maintenance.NewDeliveryMinutes(env, []string{"s"}, time.Hour)
	m.Start(b.Ctx)
	for i, o := range []status.Row{status.Sent, status.Sent, status.Failed, status.Dead, status.Pending} {
		destination := ""
		if i > 0 {
			destination = "dst_a"
		}
		m.Record("s", destination, o, 30*time.Millisecond)
	}
	m.Record("unknown", "dst_a", status.Sent, time.Millisecond)
	m.Stop()
	rates, err := b.Outbox.DeliveryRates(b.Ctx, b.Pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := rates["s"]; r.Sent != 2 || r.Retried != 1 || r.Dead != 1 || r.P50 < 25*time.Millisecond || r.P50 > 100*time.Millisecond {
		t.Errorf("counts of s: %+v, want 2 sent at about 30ms, 1 retried, 1 dead", r)
	}
	if _, ok := rates["unknown"]; ok {
		t.Errorf("a sink the counts were not made with was counted: %+v", rates["unknown"])
	}
	var sent, retried, dead int64
	err = b.Pool.QueryRow(b.Ctx, `SELECT sum(sent), sum(retried), sum(dead) FROM "`+b.Outbox.Schema()+`".destination_minutes WHERE destination = 'dst_a'`).
		Scan(&sent, &retried, &dead)
	if err != nil || sent != 1 || retried != 1 || dead != 1 {
		t.Errorf("dst_a's counts: %d sent, %d retried, %d dead (%v); want 1 of each", sent, retried, dead, err)
	}
}
