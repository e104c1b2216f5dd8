package relay_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A receiver's answer is text from outside: with a NUL and invalid UTF-8 in
// it, PostgreSQL refuses to store it as it is (SQLSTATE 22021), and a
// receipt with \u0000 is refused as jsonb (22P05). The relay stores such
// text made safe, so the other rows of the same terminal-write batch are
// written once and never delivered again. (On fb9f77d the whole batch was
// retried until the leases ran out: each good row was delivered twice and
// ended dead. Mutation tried: storedError returning the raw err.Error()
// fails this test; so do safetext.MaxErrorBytes or MaxReceiptBytes raised
// to megabytes, which store a 10 KiB error or receipt whole.)
func TestHostileReceiverTextNeverHoldsUpOtherRows(t *testing.T) {
	b := coretest.Setup(t)
	var mu sync.Mutex
	deliveries := map[string]int{}
	fake := sink.Func(func(_ context.Context, d *sink.Delivery) error {
		mu.Lock()
		deliveries[d.DedupKey]++
		mu.Unlock()
		switch d.DedupKey {
		case "hostile-error":
			return errors.New("HTTP/1.1 500 Oops\xff\x00\x1b[31m")
		case "hostile-receipt":
			return d.SetReceipt(map[string]string{"ts": "1\x00\xff"})
		case "hostile-panic":
			panic("boom\x00\xfe")
		case "long-error":
			return errors.New(strings.Repeat("e", 10<<10))
		case "long-receipt":
			return d.SetReceipt(map[string]string{"ts": strings.Repeat("r", 10<<10)})
		}
		return nil
	})
	// Every row is claimed by one claim and finished in one lingering
	// batch: one statement would carry the hostile text with the rest.
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "hook", Sink: fake, MaxAttempts: 1}}})
	keys := []string{"good-1", "hostile-error", "good-2", "hostile-receipt", "hostile-panic", "good-3", "long-error", "long-receipt"}
	msgs := make([]outboxd.Message, len(keys))
	for i, k := range keys {
		msgs[i] = outboxd.Message{Sink: "hook", DedupKey: k, Payload: "x"}
	}
	if _, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, msgs); err != nil {
		t.Fatal(err)
	}
	signals.Written.Wait(t, 20*time.Second, "every row finished", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "") == len(keys)
	})
	counts := b.StatusCounts(t)
	if counts["sent"] != 5 || counts["dead"] != 3 {
		t.Fatalf("statuses %v, want 5 sent (3 good rows and the hostile and long receipts) and 3 dead", counts)
	}
	mu.Lock()
	for _, k := range keys {
		if deliveries[k] != 1 {
			t.Errorf("%s delivered %d times, want once", k, deliveries[k])
		}
	}
	mu.Unlock()
	dead, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, operator.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantErrors := map[string]string{
		"hostile-error": `500 Oops\xff\x00\x1b[31m`,
		"hostile-panic": `sink panicked: boom\x00\xfe`,
	}
	for _, d := range dead {
		if want := wantErrors[d.DedupKey]; !strings.Contains(d.LastError, want) {
			t.Errorf("%s: last_error %q, want it to contain %q", d.DedupKey, d.LastError, want)
		}
	}
	var receipt string
	if err := b.Pool.QueryRow(b.Ctx, "SELECT receipt->>'ts' FROM "+b.Outbox.Schema()+".messages_all WHERE dedup_key = 'hostile-receipt'").Scan(&receipt); err != nil {
		t.Fatal(err)
	}
	if receipt != `1\x00`+"\uFFFD" { // json.Marshal already made \xff U+FFFD
		t.Fatalf("stored receipt ts %q, want the escaped text", receipt)
	}
	// Stored text is bounded: 2 KiB per error, 8 KiB per receipt.
	var errBytes, receiptBytes int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT (SELECT octet_length(last_error) FROM "+b.Outbox.Schema()+".messages WHERE dedup_key = 'long-error'), "+
		"(SELECT octet_length(receipt::text) FROM "+b.Outbox.Schema()+".messages_all WHERE dedup_key = 'long-receipt')").Scan(&errBytes, &receiptBytes); err != nil {
		t.Fatal(err)
	}
	if errBytes > 2<<10 || receiptBytes > 8<<10 {
		t.Errorf("a 10 KiB error stored as %d bytes (limit 2 KiB), a 10 KiB receipt as %d (limit 8 KiB)", errBytes, receiptBytes)
	}
}

// The completer is the last line: should a row's outcome still hold text
// PostgreSQL refuses (core's sanitising is bypassed here), the batch is not
// retried as a whole until the leases run out but written row by row; the
// refused row gets a clean error of its own and the real database error
// is logged. (On fb9f77d: no row of the batch was written. Mutation: write
// never falling back to writeEach fails this test.)
func TestCompleterWritesRowByRowWhenPostgreSQLRefusesARow(t *testing.T) {
	b := coretest.Setup(t)
	b.EnqueueN(t, "s", 3, nil)
	ids, token, err := relay.Claim(b.Ctx, b.Pool, b.Outbox.Schema(), []string{"s"}, 10, time.Minute)
	if err != nil || len(ids) != 3 {
		t.Fatalf("claimed %v, %v", ids, err)
	}
	slices.Sort(ids)
	logger, logs := captureLogs()
	written := relay.WriteOutcomes(testdb.Pool(t, 2), b.Outbox.Schema(), logger, time.Hour, []relay.TestOutcome{
		{ID: ids[0], Token: token, Status: status.Sent},
		{ID: ids[1], Token: token, Status: status.Failed, Err: "refused \xff\x00"},
		{ID: ids[2], Token: token, Status: status.Sent, Receipt: []byte(`{"a":"\u0000"}`), Urgent: true},
	})
	if !slices.Equal(written, []bool{true, true, true}) {
		t.Fatalf("written = %v, want every row written", written)
	}
	rows, err := b.Pool.Query(b.Ctx, "SELECT status, COALESCE(last_error, ''), receipt IS NULL FROM "+b.Outbox.Schema()+".messages_all ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var status, lastError string
		var noReceipt bool
		if err := rows.Scan(&status, &lastError, &noReceipt); err != nil {
			t.Fatal(err)
		}
		got = append(got, status)
		if status == "failed" && !strings.Contains(lastError, "could not store") {
			t.Errorf("the refused error was replaced by %q", lastError)
		}
		if status == "sent" && !noReceipt {
			t.Errorf("a refused receipt was stored")
		}
	}
	if !slices.Equal(got, []string{"sent", "failed", "sent"}) {
		t.Fatalf("statuses %v", got)
	}
	for _, want := range []string{"one by one", "SQLSTATE 22021", "SQLSTATE 22P05"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
