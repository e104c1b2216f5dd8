package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testdb"
)

// BenchmarkBurnDown measures how fast two relays with default settings
// drain a backlog of b.N messages into a no-op sink (bench/ compares this
// with River on the same machine).
func BenchmarkBurnDown(b *testing.B) {
	pool, ob := testdb.New(b)
	ctx := context.Background()
	const chunk = 5000
	for start := 0; start < b.N; start += chunk {
		var msgs []core.Message
		for i := start; i < min(b.N, start+chunk); i++ {
			msgs = append(msgs, core.Message{Sink: "noop", DedupKey: fmt.Sprint(i), Payload: `{}`})
		}
		if _, err := ob.EnqueueBatch(ctx, pool, msgs); err != nil {
			b.Fatal(err)
		}
	}
	var delivered atomic.Int64
	all := make(chan struct{})
	sink := core.SinkFunc(func(context.Context, *core.Delivery) error {
		if delivered.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	})
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	for range 2 {
		relay, err := core.NewRelay(testdb.Pool(b, 8), core.Config{Outbox: ob, Sinks: []core.SinkConfig{{Name: "noop", Sink: sink}}})
		if err != nil {
			b.Fatal(err)
		}
		go func() { done <- relay.Run(runCtx) }()
	}
	start := time.Now()
	<-all
	// Wait for the terminal writes too: a message is done when it is sent.
	for {
		var pending int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ob.Schema()+".messages WHERE status <> 'sent'").Scan(&pending); err != nil {
			b.Fatal(err)
		}
		if pending == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	b.StopTimer()
	stop()
	<-done
	<-done
}

// BenchmarkEnqueueBatch enqueues batches of 1,000 messages, each batch its
// own statement; BenchmarkRawInsert is the reference: the same rows as one
// plain multi-row INSERT, without validation, dedup reporting or wake-up.
func BenchmarkEnqueueBatch(b *testing.B) {
	pool, ob := testdb.New(b)
	ctx := context.Background()
	msgs := make([]core.Message, 1000)
	b.ResetTimer()
	for n := range b.N {
		for i := range msgs {
			msgs[i] = core.Message{Sink: "s", DedupKey: fmt.Sprintf("%d-%d", n, i), Payload: json.RawMessage(`{"order": 1, "total": "12.50"}`)}
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
