package relay_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testdb"
)

// enqueueBacklog enqueues n messages of sink "noop" in chunks, then
// analyzes the table as bench/ does: the shared test server runs without
// autovacuum, and the claim's plan on a never-analyzed table would be
// measured instead of the relay.
func enqueueBacklog(b *testing.B, pool *pgxpool.Pool, ob *testdb.Outbox, n int) {
	b.Helper()
	const chunk = 5000
	for start := 0; start < n; start += chunk {
		var msgs []core.Message
		for i := start; i < min(n, start+chunk); i++ {
			msgs = append(msgs, core.Message{Sink: "noop", DedupKey: fmt.Sprint(i), Payload: `{}`})
		}
		if _, err := ob.EnqueueBatch(context.Background(), pool, msgs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(context.Background(), "ANALYZE "+ob.Schema()+".messages"); err != nil {
		b.Fatal(err)
	}
}

// noopUntil is a no-op sink that closes all once it saw n deliveries.
func noopUntil(n int) (sink.Sink, <-chan struct{}) {
	var delivered atomic.Int64
	all := make(chan struct{})
	return sink.Func(func(context.Context, *sink.Delivery) error {
		if delivered.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}), all
}

// BenchmarkBurnDown measures how fast two relays with default settings
// drain a backlog of b.N messages into a no-op sink (bench/ compares this
// with River on the same machine).
func BenchmarkBurnDown(b *testing.B) {
	pool, ob := testdb.New(b)
	ctx := context.Background()
	enqueueBacklog(b, pool, ob, b.N)
	fake, all := noopUntil(b.N)
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

// BenchmarkRelayCPU measures what one relay with default settings costs
// per message while it drains a backlog of b.N messages into a no-op sink:
// the process's CPU time (user and system, from getrusage) and the heap
// allocations from the relay's start until Run returned, every terminal
// write done, and the threads' voluntary context switches. Nothing else runs in the process meanwhile but this
// goroutine's wait, so both are the relay's. Run it with
// -benchtime=100000x: smaller backlogs measure the start and stop more
// than the delivery path.
func BenchmarkRelayCPU(b *testing.B) {
	pool, ob := testdb.New(b)
	enqueueBacklog(b, pool, ob, b.N)
	fake, all := noopUntil(b.N)
	r, err := relay.New(testdb.Pool(b, 8), relay.Config{Schema: ob.Schema(), Sinks: []relay.SinkConfig{{Name: "noop", Sink: fake}}})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu0, switches0 := processCPU(b)
	b.ResetTimer()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	<-all
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu, switches := processCPU(b)
	cpu, switches = cpu-cpu0, switches-switches0
	runtime.ReadMemStats(&mem1)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/msg")
	b.ReportMetric(float64(mem1.Mallocs-mem0.Mallocs)/float64(b.N), "allocs/msg")
	b.ReportMetric(float64(mem1.TotalAlloc-mem0.TotalAlloc)/float64(b.N), "heap-B/msg")
	b.ReportMetric(float64(switches)/float64(b.N), "ctxsw/msg")
}

// processCPU is the user and system CPU time this process used so far,
// and how often its threads gave up the CPU to wait (voluntary context
// switches: a goroutine woken on a parked thread costs one).
func processCPU(b *testing.B) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}
