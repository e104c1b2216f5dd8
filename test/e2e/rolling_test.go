package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRollingDeployAddingASink: while a deploy adds a sink, the old relay
// (without it) runs next to producers of the new version. The old relay
// leaves the new sink's rows pending with no attempt spent, warns about
// them, and stats lists the sink as not configured; the new relay then
// delivers each exactly once. A sink no relay will ever have is deleted
// with dlq purge --waiting. (On fb9f77d the old relay dead-lettered the new
// sink's rows. Mutation: the claim taking every sink's ready rows, which
// the old relay then hands back unattempted, fails this test.)
func TestRollingDeployAddingASink(t *testing.T) {
	t.Parallel()
	oldRcv, newRcv := newReceiver(t), newReceiver(t)
	old := newEnv(t, webhookSink("partner", oldRcv), "")
	next := old.withConfig(t, webhookSink("partner", oldRcv)+webhookSink("added", newRcv))
	next.mustRun("migrate")

	const n = 20
	for i := range n {
		next.mustRun("enqueue", "--sink", "added", "--key", fmt.Sprintf("a-%d", i), "--text", "new sink")
	}
	oldRelay := old.serve()
	old.mustRun("enqueue", "--sink", "partner", "--key", "p-1", "--text", "old sink")
	eventually(t, 30*time.Second, "the old relay to deliver its own sink's row", func() bool {
		distinct, _ := oldRcv.received()
		return distinct == 1
	})
	eventually(t, 30*time.Second, "the old relay's warning about the added sink", func() bool {
		return strings.Contains(oldRelay.Logs(), `"sink":"added"`) && strings.Contains(oldRelay.Logs(), "does not have")
	})
	var report struct {
		Sinks map[string]struct {
			Pending    int  `json:"pending"`
			Configured bool `json:"configured"`
		} `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(old.mustRun("stats", "--json")), &report); err != nil {
		t.Fatal(err)
	}
	if s := report.Sinks["added"]; s.Pending != n || s.Configured {
		t.Fatalf("old stats of the added sink: %+v, want %d pending, not configured", s, n)
	}
	if table := old.mustRun("stats"); !strings.Contains(table, "not configured on this relay") {
		t.Fatalf("the stats table does not mark the added sink:\n%s", table)
	}
	var attempts, touched int
	if err := old.pool.QueryRow(t.Context(), "SELECT COALESCE(sum(attempts), 0), count(*) FILTER (WHERE last_error IS NOT NULL OR updated_at <> created_at) FROM "+
		old.schema+".messages_all WHERE sink = 'added'").Scan(&attempts, &touched); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || touched != 0 {
		t.Fatalf("the old relay spent %d attempts on the added sink's rows and changed %d of them", attempts, touched)
	}

	next.serve()
	eventually(t, 30*time.Second, "the new relay to deliver the added sink's rows", func() bool {
		distinct, _ := newRcv.received()
		return distinct == n
	})
	eventually(t, 30*time.Second, "every added row sent", func() bool { return old.stats()["added"]["sent_last_hour"] == n })
	if distinct, total := newRcv.received(); distinct != n || total != n {
		t.Fatalf("the added sink's receiver got %d deliveries of %d messages, want exactly %d", total, distinct, n)
	}

	// A sink no relay has: its rows wait until they are purged on purpose.
	typo := old.withConfig(t, webhookSink("partner", oldRcv)+"  partnr:\n    type: discard\n")
	typo.mustRun("enqueue", "--sink", "partnr", "--key", "t-1", "--text", "typo")
	if _, stderr, code := old.run(nil, "dlq", "purge", "--all", "--waiting"); code != 2 || !strings.Contains(stderr, "--waiting needs --all and --sink") {
		t.Fatalf("purge --waiting without --sink: exit %d, %s", code, stderr)
	}
	if out := old.mustRun("dlq", "purge", "--all", "--waiting", "--sink", "partnr", "--yes"); !strings.Contains(out, "purged 1") {
		t.Fatalf("purge --waiting: %q", out)
	}
}

// withConfig returns an env on the same schema whose sinks block is sinks.
func (e *env) withConfig(t *testing.T, sinks string) *env {
	t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(cfg), "\nsinks:\n")
	other := *e
	other.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(other.config, []byte(head+"\nsinks:\n"+sinks), 0o600); err != nil {
		t.Fatal(err)
	}
	return &other
}
