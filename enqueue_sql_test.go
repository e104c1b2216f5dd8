package outboxd_test

// Tests of the SQL enqueue() function (migrations/002_enqueue_function.sql,
// redefined by 011_enqueue_sink_name.sql)
// against the Go Enqueue it stands in for: same validation, same rows,
// same duplicate answer, same wake-up.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// sqlInvalidMessage is the SQLSTATE enqueue() raises for bad input
// (invalid_parameter_value).
const sqlInvalidMessage = "22023"

// sqlEnqueue calls the schema's enqueue() with every argument by name and
// returns its answer.
func sqlEnqueue(ctx context.Context, db outboxd.DBTX, ob *testdb.Outbox, m outboxd.Message, payload any, headers any) (outboxd.EnqueueResult, error) {
	var orderingKey, availableAt, maxAttempts any
	if m.OrderingKey != "" {
		orderingKey = m.OrderingKey
	}
	if !m.AvailableAt.IsZero() {
		availableAt = m.AvailableAt
	}
	if m.MaxAttempts != 0 {
		maxAttempts = m.MaxAttempts
	}
	var r outboxd.EnqueueResult
	err := db.QueryRow(ctx, `SELECT id, created FROM `+pgx.Identifier{ob.Schema()}.Sanitize()+`.enqueue(
		sink => $1, dedup_key => $2, payload => $3::jsonb, ordering_key => $4,
		headers => $5::jsonb, available_at => $6, max_attempts => $7)`,
		m.Sink, m.DedupKey, payload, orderingKey, headers, availableAt, maxAttempts).Scan(&r.ID, &r.Created)
	return r, err
}

// inRolledBackTx runs f in a transaction that is rolled back afterwards.
func inRolledBackTx(t *testing.T, b coretest.Bundle, f func(tx pgx.Tx) error) error {
	t.Helper()
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.Ctx) }()
	return f(tx)
}

// TestSQLEnqueueValidatesLikeGo: every message Go's Enqueue rejects, the SQL
// function rejects with the same words under SQLSTATE 22023; every message
// Go accepts, it accepts.
// (Mutation: max_key_bytes = 2550 in the SQL function fails this test; so
// does leaving the sink out of migration 011's loop over the keys, as
// migration 002 did: the over-long sinks and those with a newline or a
// no-break space are then stored.)
func TestSQLEnqueueValidatesLikeGo(t *testing.T) {
	b := coretest.Setup(t)
	payloadOf := func(size int) string { // {"p": "xx...x"} of size bytes, as jsonb prints it
		return `{"p": "` + strings.Repeat("x", size-len(`{"p": ""}`)) + `"}`
	}
	ok := outboxd.Message{Sink: "s", DedupKey: "k"}
	with := func(f func(m *outboxd.Message)) outboxd.Message { m := ok; f(&m); return m }
	cases := []struct {
		name    string
		msg     outboxd.Message
		payload any // JSON text, or nil for SQL NULL / a Go nil payload
		// sameWords is false where the key is quoted differently (Go's %q
		// escapes non-ASCII; to_json does not): then only the wording
		// around the key is compared.
		sameWords bool
	}{
		{"valid", ok, `{"n": 1}`, true},
		{"empty sink", with(func(m *outboxd.Message) { m.Sink = "" }), `{}`, true},
		{"sink at the limit", with(func(m *outboxd.Message) { m.Sink = strings.Repeat("s", outboxd.MaxDedupKeyBytes) }), `{}`, true},
		{"sink over the limit", with(func(m *outboxd.Message) { m.Sink = strings.Repeat("s", 3000) }), `{}`, true},
		{"multi-byte sink over the limit", with(func(m *outboxd.Message) { m.Sink = strings.Repeat("é", outboxd.MaxDedupKeyBytes/2+1) }), `{}`, true},
		{"newline in sink", with(func(m *outboxd.Message) { m.Sink = "a\nb" }), `{}`, true},
		{"no-break space in sink", with(func(m *outboxd.Message) { m.Sink = "a\u00a0b" }), `{}`, false},
		{"empty dedup key", with(func(m *outboxd.Message) { m.DedupKey = "" }), `{}`, true},
		{"dedup key at the limit", with(func(m *outboxd.Message) { m.DedupKey = strings.Repeat("k", outboxd.MaxDedupKeyBytes) }), `{}`, true},
		{"dedup key over the limit", with(func(m *outboxd.Message) { m.DedupKey = strings.Repeat("k", outboxd.MaxDedupKeyBytes+1) }), `{}`, true},
		{"multi-byte dedup key over the limit", with(func(m *outboxd.Message) { m.DedupKey = strings.Repeat("é", outboxd.MaxDedupKeyBytes/2+1) }), `{}`, true},
		{"printable non-ASCII dedup key", with(func(m *outboxd.Message) { m.DedupKey = "commande-été-✓" }), `{}`, true},
		{"newline in dedup key", with(func(m *outboxd.Message) { m.DedupKey = "a\nb" }), `{}`, true},
		{"no-break space in dedup key", with(func(m *outboxd.Message) { m.DedupKey = "a\u00a0b" }), `{}`, false},
		{"zero-width space in ordering key", with(func(m *outboxd.Message) { m.OrderingKey = "a\u200bb" }), `{}`, false},
		{"ordering key over the limit", with(func(m *outboxd.Message) { m.OrderingKey = strings.Repeat("o", outboxd.MaxDedupKeyBytes+1) }), `{}`, true},
		{"negative max attempts", with(func(m *outboxd.Message) { m.MaxAttempts = -1 }), `{}`, true},
		{"no payload", ok, nil, true},
		{"payload at the limit", ok, payloadOf(outboxd.DefaultMaxPayloadBytes), true},
		{"payload over the limit", ok, payloadOf(outboxd.DefaultMaxPayloadBytes + 1), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			goMsg := c.msg
			if c.payload != nil {
				goMsg.Payload = json.RawMessage(c.payload.(string))
			}
			goErr := inRolledBackTx(t, b, func(tx pgx.Tx) error { _, err := b.Outbox.Enqueue(b.Ctx, tx, goMsg); return err })
			sqlErr := inRolledBackTx(t, b, func(tx pgx.Tx) error {
				_, err := sqlEnqueue(b.Ctx, tx, b.Outbox, c.msg, c.payload, nil)
				return err
			})
			switch {
			case goErr == nil && sqlErr == nil:
				return
			case goErr == nil || sqlErr == nil:
				t.Fatalf("Go: %v; SQL: %v", goErr, sqlErr)
			case !errors.Is(goErr, outboxd.ErrInvalidMessage):
				t.Fatalf("Go failed for another reason than validation: %v", goErr)
			}
			var pgErr *pgconn.PgError
			if !errors.As(sqlErr, &pgErr) || pgErr.Code != sqlInvalidMessage {
				t.Fatalf("SQL error %v, want SQLSTATE %s", sqlErr, sqlInvalidMessage)
			}
			if c.sameWords {
				if pgErr.Message != goErr.Error() {
					t.Fatalf("SQL says %q, Go says %q", pgErr.Message, goErr.Error())
				}
				return
			}
			quoted := regexp.MustCompile(`".*"`)
			if quoted.ReplaceAllString(pgErr.Message, "KEY") != quoted.ReplaceAllString(goErr.Error(), "KEY") {
				t.Fatalf("SQL says %q, Go says %q", pgErr.Message, goErr.Error())
			}
		})
	}
}

// TestSQLEnqueueHeadersMustBeStrings: headers are a JSON object of strings,
// as Go's map[string]string is.
func TestSQLEnqueueHeadersMustBeStrings(t *testing.T) {
	b := coretest.Setup(t)
	for _, headers := range []string{`[]`, `"traceparent"`, `{"n": 1}`, `{"a": null}`} {
		_, err := sqlEnqueue(b.Ctx, b.Pool, b.Outbox, outboxd.Message{Sink: "s", DedupKey: "k"}, `{}`, headers)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != sqlInvalidMessage || !strings.Contains(pgErr.Message, "headers") {
			t.Errorf("headers %s: got %v, want SQLSTATE %s naming headers", headers, err, sqlInvalidMessage)
		}
	}
	if n := b.StatusCounts(t)["pending"]; n != 0 {
		t.Fatalf("%d rows stored from invalid messages", n)
	}
}

// TestSQLEnqueueNonPrintableMatchesGo checks the function's pattern of
// characters a key may not hold against unicode.IsPrint, code point by code
// point: it rejects exactly what Go rejects, except code points Unicode has
// not assigned (which Go's tables reject and the pattern lets through).
// (Mutation: the pattern letting U+00A0 through fails this test.)
func TestSQLEnqueueNonPrintableMatchesGo(t *testing.T) {
	b := coretest.Setup(t)
	pattern := nonPrintablePattern(t)
	rows, err := b.Pool.Query(b.Ctx, `SELECT cp FROM generate_series(1, 1114111) cp
		WHERE cp NOT BETWEEN 55296 AND 57343 AND chr(cp) ~ $1`, pattern)
	if err != nil {
		t.Fatal(err)
	}
	rejected, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	got := map[rune]bool{}
	for _, r := range rejected {
		got[r] = true
	}
	assigned := []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co}
	var wrong []string
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF { // surrogates: not in any text value
			continue
		}
		want := r == unicode.ReplacementChar || (!unicode.IsPrint(r) && unicode.In(r, assigned...))
		if got[r] != want && len(wrong) < 20 {
			wrong = append(wrong, fmt.Sprintf("U+%04X (SQL rejects: %v)", r, got[r]))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("the SQL pattern and unicode.IsPrint disagree on %s", strings.Join(wrong, ", "))
	}
}

// nonPrintablePattern extracts the non_printable constant (adjacent string
// literals) from the enqueue() migration (package migrate holds it).
func nonPrintablePattern(t *testing.T) string {
	t.Helper()
	migration, err := os.ReadFile("core/migrate/migrations/002_enqueue_function.sql")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`non_printable CONSTANT text := ((?:'[^']*'\s*)+);`).FindSubmatch(migration)
	if decl == nil {
		t.Fatal("no non_printable constant in the enqueue_function migration")
	}
	var pattern strings.Builder
	for _, lit := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(decl[1], -1) {
		pattern.Write(lit[1])
	}
	return pattern.String()
}

// TestSQLEnqueueStoresWhatGoStores: a message with every optional field,
// enqueued through SQL, is the same row as through Go; enqueued again it
// is a duplicate with the first id.
func TestSQLEnqueueStoresWhatGoStores(t *testing.T) {
	b := coretest.Setup(t)
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	m := outboxd.Message{Sink: "s", OrderingKey: "customer-7", AvailableAt: at, MaxAttempts: 3,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	headers, _ := json.Marshal(m.Headers)

	goMsg := m
	goMsg.DedupKey, goMsg.Payload = "via-go", json.RawMessage(`{"order": 42}`)
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, goMsg); err != nil {
		t.Fatal(err)
	}
	m.DedupKey = "via-sql"
	first, err := sqlEnqueue(b.Ctx, b.Pool, b.Outbox, m, `{"order": 42}`, string(headers))
	if err != nil || !first.Created {
		t.Fatalf("SQL enqueue: %+v, %v", first, err)
	}
	again, err := sqlEnqueue(b.Ctx, b.Pool, b.Outbox, m, `{"order": 43}`, nil)
	if err != nil || again != (outboxd.EnqueueResult{ID: first.ID, Created: false}) {
		t.Fatalf("duplicate: %+v, %v; want id %d, created false", again, err, first.ID)
	}

	row := func(key string) string {
		var s string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT row(sink, payload, headers, ordering_key, status, attempts, max_attempts, available_at)::text
			FROM `+b.Outbox.Schema()+`.messages WHERE dedup_key = $1`, key).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if g, s := row("via-go"), row("via-sql"); g != s {
		t.Fatalf("rows differ:\nGo:  %s\nSQL: %s", g, s)
	}
	// Without the optional fields the defaults are Go's too.
	if _, err := sqlEnqueue(b.Ctx, b.Pool, b.Outbox, outboxd.Message{Sink: "s", DedupKey: "plain-sql"}, `{}`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "plain-go", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var differing int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(DISTINCT (headers, ordering_key, max_attempts, available_at <= now()))
		FROM `+b.Outbox.Schema()+`.messages WHERE dedup_key IN ('plain-sql', 'plain-go')`).Scan(&differing); err != nil {
		t.Fatal(err)
	}
	if differing != 1 {
		t.Fatal("a plain message's defaults differ between SQL and Go")
	}
}

// TestSQLEnqueueDuplicateCommittedConcurrently: a second transaction
// enqueueing a key that a first one holds uncommitted waits for it and,
// once it commits, answers the first row's id with created = false.
// (Mutation: the function reporting a duplicate as created fails this test.)
func TestSQLEnqueueDuplicateCommittedConcurrently(t *testing.T) {
	b := coretest.Setup(t)
	m := outboxd.Message{Sink: "s", DedupKey: "race"}
	first, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(b.Ctx) }()
	created, err := sqlEnqueue(b.Ctx, first, b.Outbox, m, `{"from": 1}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res outboxd.EnqueueResult
		err error
	}
	second := make(chan answer, 1)
	go func() {
		res, err := sqlEnqueue(b.Ctx, b.Pool, b.Outbox, m, `{"from": 2}`, nil)
		second <- answer{res, err}
	}()
	// The second enqueue must be waiting on the first's row lock.
	waitForLockWait(t, b)
	if err := first.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	a := <-second
	if a.err != nil || a.res != (outboxd.EnqueueResult{ID: created.ID, Created: false}) {
		t.Fatalf("second enqueue: %+v, %v; want id %d, created false", a.res, a.err, created.ID)
	}
}

// waitForLockWait waits until some backend of the test database waits for a
// transaction lock (an INSERT held up by an uncommitted conflicting key).
func waitForLockWait(t *testing.T, b coretest.Bundle) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := b.Pool.QueryRow(b.Ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%.enqueue(%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second enqueue never waited for the first")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSQLEnqueueWakesRelaysOnCommitOnly: the function notifies its own
// schema's waiting relay loop (migration 006) even when the caller's
// search_path does not include the schema, and the notification is heard
// only when the transaction commits - a rolled-back or duplicate enqueue
// wakes nobody. (Mutation: the function not calling wake() fails this test;
// so does enqueue() without SET search_path FROM CURRENT, which until this
// test rolled back its transaction on failure hung its cleanup instead.)
func TestSQLEnqueueWakesRelaysOnCommitOnly(t *testing.T) {
	b := coretest.Setup(t)
	notified := listenAsWaitingLoop(t, b, "s").heard
	enqueueIn := func(key string, commit bool) {
		tx, err := b.Pool.Begin(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A failure below must not leave the connection in a transaction:
		// the pool's Close, at cleanup, would wait for it for ever.
		defer func() { _ = tx.Rollback(b.Ctx) }()
		if _, err := tx.Exec(b.Ctx, "SET LOCAL search_path TO public"); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlEnqueue(b.Ctx, tx, b.Outbox, outboxd.Message{Sink: "s", DedupKey: key}, `{}`, nil); err != nil {
			t.Fatal(err)
		}
		// Uncommitted: nothing may be heard yet.
		if notified(100 * time.Millisecond) {
			t.Fatal("notification before commit")
		}
		if commit {
			err = tx.Commit(b.Ctx)
		} else {
			err = tx.Rollback(b.Ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueueIn("rolled-back", false)
	if notified(200 * time.Millisecond) {
		t.Fatal("a rolled-back enqueue woke the relays")
	}
	enqueueIn("committed", true)
	if !notified(5 * time.Second) {
		t.Fatal("a committed enqueue did not wake the relays")
	}
	enqueueIn("committed", true) // a duplicate
	if notified(200 * time.Millisecond) {
		t.Fatal("a duplicate enqueue woke the relays")
	}
}
