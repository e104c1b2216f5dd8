package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// delivery is one call of the sink (outboxd) or worker (River): the row or
// job id and when the call started (Unix nanoseconds, wall clock, so the
// parent process can compare it with its commit times).
type delivery struct {
	ID int64
	Ns int64
}

// recorder collects deliveries from many goroutines. Slots of a preallocated
// slice are handed out with one atomic add, so recording costs the relay
// almost nothing; past the expected count it falls back to a mutex.
type recorder struct {
	countOnly bool // count, keep nothing (set before the relay starts)
	next      atomic.Int64
	buf       []delivery
	mu        sync.Mutex
	extra     []delivery
}

func newRecorder(expect int) *recorder {
	return &recorder{buf: make([]delivery, expect)}
}

func (r *recorder) add(id int64) {
	if r.countOnly {
		r.next.Add(1)
		return
	}
	d := delivery{ID: id, Ns: time.Now().UnixNano()}
	if i := r.next.Add(1) - 1; i < int64(len(r.buf)) {
		r.buf[i] = d
		return
	}
	r.mu.Lock()
	r.extra = append(r.extra, d)
	r.mu.Unlock()
}

// count is how many deliveries were recorded so far.
func (r *recorder) count() int64 { return r.next.Load() }

// all returns every delivery; call it once the relay has stopped.
func (r *recorder) all() []delivery {
	n := min(r.next.Load(), int64(len(r.buf)))
	return append(r.buf[:n:n], r.extra...)
}

// stmtSample is one statement a relay sent: its kind, when it started, how
// long it took as the relay saw it (round trip included) and its row count.
type stmtSample struct {
	Kind    string
	StartNs int64
	DurNs   int64
	Rows    int64 // rows the statement returned or changed
}

// claimKinds are the statements that claim work: outboxd's claim and River's
// JobGetAvailable.
var claimKinds = map[string]bool{"claim": true, "JobGetAvailable": true}

// isClaim says whether a statement of kind claims work: one of claimKinds,
// or an outboxd statement named claim_* (a per-sink or keyed variant).
func isClaim(kind string) bool { return claimKinds[kind] || strings.HasPrefix(kind, "claim_") }

// stmtTracer is a pgx QueryTracer that records every statement of the
// relay's pool, so the benchmark sees the same statements in both systems
// without touching their code.
type stmtTracer struct {
	mu      sync.Mutex
	samples []stmtSample
}

func newStmtTracer() *stmtTracer { return &stmtTracer{} }

type traceKey struct{}

type traceStart struct {
	kind string
	at   time.Time
}

func (t *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{kind: stmtKind(data.SQL), at: time.Now()})
}

func (t *stmtTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	s, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	sample := stmtSample{Kind: s.kind, StartNs: s.at.UnixNano(), DurNs: time.Since(s.at).Nanoseconds(),
		Rows: data.CommandTag.RowsAffected()}
	t.mu.Lock()
	t.samples = append(t.samples, sample)
	t.mu.Unlock()
}

// snapshot copies the statements recorded so far.
func (t *stmtTracer) snapshot() []stmtSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]stmtSample(nil), t.samples...)
}

// stmtKind names a statement: outboxd's and River's carry their name in a
// leading comment ("-- name: claim", River's sqlc names); the bare loop's
// and anything else are named by their first words.
func stmtKind(sql string) string {
	sql = strings.TrimSpace(sql)
	if name, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if i := strings.IndexAny(name, " \n"); i > 0 {
			return name[:i]
		}
		return name
	}
	fields := strings.Fields(sql)
	return strings.Join(fields[:min(3, len(fields))], " ")
}
