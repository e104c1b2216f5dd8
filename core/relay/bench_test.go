package relay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
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
	fake := sink.Func(func(context.Context, *sink.Delivery) error {
		if delivered.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	})
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	for range 2 {
		r, err := relay.New(testdb.Pool(b, 8), relay.Config{Schema: ob.Schema(), Sinks: []relay.SinkConfig{{Name: "noop", Sink: fake}}})
		if err != nil {
			b.Fatal(err)
		}
		go func() { done <- r.Run(runCtx) }()
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
