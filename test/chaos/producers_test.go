package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// producerRetryDelay is how long a producer waits before retrying an
// enqueue that failed (the database restarting, a relay killed under an
// API request).
const producerRetryDelay = 200 * time.Millisecond

// ledger is what the producers know: which messages committed (and how
// each was planned), and which were rolled back.
type ledger struct {
	mu         sync.Mutex
	committed  map[string]msg // dedup key -> the message
	rolledBack map[string]bool
}

func newLedger() *ledger {
	return &ledger{committed: map[string]msg{}, rolledBack: map[string]bool{}}
}

func (l *ledger) commit(msgs []msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.committed[m.key] = m
	}
}

func (l *ledger) rollBack(msgs []msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.rolledBack[m.key] = true
	}
}

// msg is one planned message.
type msg struct {
	key, orderingKey string
	// poison: the receiver refuses it for good (400 or 410), so it must
	// be dead after one attempt.
	poison bool
	// doom: the receiver answers 500 every time, so it must be dead after
	// max_attempts.
	doom bool
}

func (m msg) payload() json.RawMessage {
	b, _ := json.Marshal(map[string]any{"k": m.key, "poison": m.poison, "doom": m.doom, "pad": "chaos payload"})
	return b
}

// planner hands out message specs: a share with ordering keys owned by
// one producer (so id order is that producer's enqueue order), and in
// every planEvery messages one poisoned and one doomed one, so that every
// producer's messages take both dead-letter paths.
type planner struct {
	prefix string
	n      int
	rng    *rand.Rand
}

// Shares of the planned messages.
const (
	orderedShare = 0.2
	orderingKeys = 8 // per producer
	planEvery    = 200
	poisonAt     = 37  // n % planEvery
	doomAt       = 137 // n % planEvery
	// rollbackEvery: one library transaction in this many rolls back (its
	// messages must never reach the receiver); it is not a multiple of 3,
	// so rolled-back transactions use both Enqueue and EnqueueBatch.
	rollbackEvery = 4
)

func newPlanner(prefix string) *planner {
	return &planner{prefix: prefix, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

func (p *planner) next() msg {
	p.n++
	m := msg{key: fmt.Sprintf("%s-%06d", p.prefix, p.n)}
	switch {
	case p.n%planEvery == poisonAt:
		m.poison = true
	case p.n%planEvery == doomAt:
		m.doom = true
	case p.rng.Float64() < orderedShare:
		m.orderingKey = fmt.Sprintf("%s-key-%d", p.prefix, p.rng.IntN(orderingKeys))
	}
	return m
}

func (p *planner) batch(n int) []msg {
	out := make([]msg, n)
	for i := range out {
		out[i] = p.next()
	}
	return out
}

// pace spreads n steps over d: it sleeps what is left of step i's share.
func pace(ctx context.Context, start time.Time, d time.Duration, i, n int) {
	due := start.Add(d * time.Duration(i) / time.Duration(n))
	if wait := time.Until(due); wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// libraryProducer commits total messages with outboxd.EnqueueBatch and
// outboxd.Enqueue inside transactions of txSize, rolling back one in
// rollbackEvery (those messages must never be delivered). A transaction that fails
// (the database restarting) is retried with the same dedup keys, which
// makes an ambiguous commit harmless.
func libraryProducer(ctx context.Context, pool *pgxpool.Pool, ob *testdb.Outbox, l *ledger, prefix string, total, txSize int, over time.Duration) error {
	p := newPlanner(prefix)
	start := time.Now()
	steps := (total + txSize - 1) / txSize
	committed := 0 // rolled-back messages come on top of total
	for i := 0; committed < total; i++ {
		pace(ctx, start, over, i, steps)
		msgs := p.batch(min(txSize, total-committed))
		rollback := i%rollbackEvery == rollbackEvery-1
		single := i%3 == 0 // every third transaction uses Enqueue per message
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := enqueueIn(ctx, tx, ob, msgs, single); err != nil {
					return err
				}
				if rollback {
					return errRollback
				}
				return nil
			})
			if err == errRollback {
				l.rollBack(msgs)
				break
			}
			if err == nil {
				l.commit(msgs)
				committed += len(msgs)
				break
			}
			if rollback {
				l.rollBack(msgs) // failed before commit: rolled back all the same
				break
			}
			time.Sleep(producerRetryDelay)
		}
	}
	return nil
}

var errRollback = fmt.Errorf("roll back on purpose")

func enqueueIn(ctx context.Context, tx pgx.Tx, ob *testdb.Outbox, msgs []msg, single bool) error {
	batch := make([]outboxd.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = outboxd.Message{Sink: sinkName, DedupKey: m.key, Payload: m.payload(), OrderingKey: m.orderingKey}
	}
	if !single {
		_, err := ob.EnqueueBatch(ctx, tx, batch)
		return err
	}
	for _, m := range batch {
		if _, err := ob.Enqueue(ctx, tx, m); err != nil {
			return err
		}
	}
	return nil
}

// apiProducer posts total messages one by one to POST /v1/messages of
// whichever relay is alive, retrying on another after a failure (a killed
// relay, the database restarting); a retried post is answered 200
// "duplicate" when the first one had committed.
func apiProducer(ctx context.Context, cl *cluster, l *ledger, prefix string, total int, over time.Duration) error {
	p := newPlanner(prefix)
	start := time.Now()
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range total {
		pace(ctx, start, over, i, total)
		m := p.next()
		body, _ := json.Marshal(map[string]any{"sink": sinkName, "dedup_key": m.key, "payload": m.payload(), "ordering_key": m.orderingKey})
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if postMessage(ctx, client, cl.anyAddr(), cl.token, body) {
				l.commit([]msg{m})
				break
			}
			time.Sleep(producerRetryDelay)
		}
	}
	return nil
}

func postMessage(ctx context.Context, client *http.Client, addr, token string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK
}

// cliProducer writes files JSON-lines files of perFile messages and runs
// `outboxd enqueue --file` on each, rerunning a file whose run failed
// (lines already stored come back as duplicates).
func cliProducer(ctx context.Context, cl *cluster, l *ledger, prefix string, files, perFile int, over time.Duration) error {
	p := newPlanner(prefix)
	start := time.Now()
	for i := range files {
		pace(ctx, start, over, i, files)
		msgs := p.batch(perFile)
		var buf bytes.Buffer
		for _, m := range msgs {
			line, _ := json.Marshal(map[string]any{"dedup_key": m.key, "payload": m.payload(), "ordering_key": m.orderingKey})
			buf.Write(append(line, '\n'))
		}
		file := filepath.Join(cl.dir, fmt.Sprintf("%s-%d.jsonl", prefix, i))
		if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
			return err
		}
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res, err := proc.Run(ctx, cl.bin, cl.env, nil, "--config", cl.config, "enqueue", "--sink", sinkName, "--file", file)
			if err == nil && res.Code == 0 {
				l.commit(msgs)
				break
			}
			time.Sleep(producerRetryDelay)
		}
	}
	return nil
}
