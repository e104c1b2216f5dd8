package outboxd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// BenchmarkEnqueueBatch enqueues batches of 1,000 messages, each batch its
// own statement; BenchmarkRawInsert is the reference: the same rows as one
// plain multi-row INSERT, without validation, dedup reporting or wake-up.
func BenchmarkEnqueueBatch(b *testing.B) {
	pool, ob := testdb.New(b)
	ctx := context.Background()
	msgs := make([]outboxd.Message, 1000)
	b.ResetTimer()
	for n := range b.N {
		for i := range msgs {
			msgs[i] = outboxd.Message{Sink: "s", DedupKey: fmt.Sprintf("%d-%d", n, i), Payload: json.RawMessage(`{"order": 1, "total": "12.50"}`)}
		}
		if _, err := ob.EnqueueBatch(ctx, pool, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkRawInsert(b *testing.B) {
	pool, ob := testdb.New(b)
	ctx := context.Background()
	var sql strings.Builder
	b.ResetTimer()
	for n := range b.N {
		sql.Reset()
		sql.WriteString("INSERT INTO " + ob.Schema() + ".messages (sink, dedup_key, payload) VALUES ")
		for i := range 1000 {
			if i > 0 {
				sql.WriteString(",")
			}
			fmt.Fprintf(&sql, `('s', '%d-%d', '{"order": 1, "total": "12.50"}')`, n, i)
		}
		if _, err := pool.Exec(ctx, sql.String()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
}
