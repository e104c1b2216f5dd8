package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/routing"
	destsink "github.com/outboxd/outboxd/sinks/destinations"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// The destinations scenario's outboxes: each tenant has destsPerTenant
// destinations, destsSubscribed of them subscribed to order.* (the
// others to invoice.*, which the scenario never publishes), and the
// route "orders" sends order.* to the destinations of the tenant in
// .data.account_id through the destinations sink "customers"; the route
// "plain" sends plain.* to the webhook sink "hook", the 1-row reference.
const (
	destsPerTenant   = 10
	destsSubscribed  = 3
	destSinkName     = "customers"
	destWebhookSink  = "hook"
	destRoute        = "orders"
	destPlainRoute   = "plain"
	destEventType    = "order.created"
	destPlainType    = "plain.created"
	destOrderPattern = "order.*"
	destOtherPattern = "invoice.*"
	// destTenantTemplate names an event's tenant, as the guide's route does.
	destTenantTemplate = "{{.data.account_id}}"
	// destSeedPerTx is how many destinations one transaction creates, on
	// each of destSeedWorkers connections.
	destSeedPerTx   = 250
	destSeedWorkers = 4
	// destPublishBatch is the number of events of one PublishBatch when
	// the scenario prepares a backlog.
	destPublishBatch = 100
	// destLoadTimeout bounds a directory's first read.
	destLoadTimeout = time.Minute
)

// destOutbox is one outbox schema of the scenario with its tenants'
// destinations stored and its routes applied.
type destOutbox struct {
	schema  string
	tenants int
	ob      *outboxd.Outbox
	keys    *destinations.Keyring
	// subscribed are the ids of each tenant's destinations subscribed to
	// order.*, by tenant index.
	subscribed [][]string
}

// tenantID names tenant i as the application would: its account id.
func tenantID(i int) string { return fmt.Sprintf("tenant-%04d", i) }

// destRoutes are the scenario's routes.
func destRoutes() routing.Config {
	return routing.Config{Unmatched: routing.UnmatchedDrop, Routes: map[string]routing.Route{
		destRoute:      {Events: []string{destOrderPattern}, To: []routing.Target{{Sink: destSinkName, Tenant: destTenantTemplate}}},
		destPlainRoute: {Events: []string{"plain.*"}, To: []routing.Target{{Sink: destWebhookSink}}},
	}}
}

// destSinks builds the scenario's sinks: the destinations sink (allowed
// to reach 127.0.0.1, its other options the defaults), finding the
// destinations in resources (nil: none, the sink is not run), and the
// webhook sink posting to the receiver.
func destSinks(rv *receiver, resources sink.Resources) (sink.Sink, sink.Sink, error) {
	s, err := destsink.Type.New(destSinkName, map[string]any{"allow_private": true}, sink.Env{Resources: resources})
	if err != nil {
		return nil, nil, err
	}
	hook, err := webhook.Type.New(destWebhookSink, map[string]any{"url": rv.base + "/plain", "allow_private": true}, sink.Env{})
	if err != nil {
		return nil, nil, err
	}
	return s, hook, nil
}

// destTable compiles the routes for the sinks of one relay session.
func destTable(customers, hook sink.Sink) (*routing.Table, error) {
	table, problems := routing.Compile(destRoutes(), map[string]sink.Sink{destSinkName: customers, destWebhookSink: hook})
	if len(problems) > 0 {
		return nil, fmt.Errorf("routes: %v", problems)
	}
	return table, nil
}

// migrateDestRoutes migrates schema and applies the destinations
// scenarios' routes, their sinks pointed at rv.
func migrateDestRoutes(ctx context.Context, pool *pgxpool.Pool, schema string, rv *receiver) (*outboxd.Outbox, error) {
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		return nil, err
	}
	if _, err := ob.Migrator().Migrate(ctx, pool); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", schema, err)
	}
	customers, hook, err := destSinks(rv, nil)
	if err != nil {
		return nil, err
	}
	table, err := destTable(customers, hook)
	if err != nil {
		return nil, err
	}
	if _, err := ob.Routes().Apply(ctx, pool, table, audit.Actor{Name: "bench", Role: "admin", Source: "bench"}); err != nil {
		return nil, fmt.Errorf("apply routes to %s: %w", schema, err)
	}
	return ob, nil
}

// newDestOutbox migrates schema, applies the routes and creates the
// destinations of tenants tenants, pointed at rv, through
// destinations.Store with a keyring of a fresh key.
func newDestOutbox(ctx context.Context, pool *pgxpool.Pool, schema string, tenants int, rv *receiver) (*destOutbox, error) {
	ob, err := migrateDestRoutes(ctx, pool, schema, rv)
	if err != nil {
		return nil, err
	}
	key, err := destinations.NewKey("bench")
	if err != nil {
		return nil, err
	}
	keys, err := destinations.ParseKeyring(key)
	if err != nil {
		return nil, err
	}
	o := &destOutbox{schema: schema, tenants: tenants, ob: ob, keys: keys, subscribed: make([][]string, tenants)}
	return o, o.seed(ctx, pool, rv)
}

// seed creates every tenant's destinations, destSeedPerTx to a
// transaction on destSeedWorkers connections: worker w takes the w-th
// chunk of tenants and every destSeedWorkers-th after it.
func (o *destOutbox) seed(ctx context.Context, pool *pgxpool.Pool, rv *receiver) error {
	st := o.ob.Destinations(o.keys)
	perTx := max(1, destSeedPerTx/destsPerTenant)
	errs := make([]error, destSeedWorkers)
	var wg sync.WaitGroup
	for w := range destSeedWorkers {
		wg.Go(func() {
			for first := w * perTx; first < o.tenants && errs[w] == nil; first += destSeedWorkers * perTx {
				errs[w] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					for t := first; t < min(first+perTx, o.tenants); t++ {
						if err := o.createTenant(ctx, st, tx, t, rv); err != nil {
							return err
						}
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("create destinations in %s: %w", o.schema, err)
	}
	return nil
}

// benchActor is who the audit trail records the scenario's destinations
// as created by.
var benchActor = audit.Actor{Name: "bench", Role: "admin", Source: "bench"}

// createTenant creates tenant t's destinations in tx; each worker
// creates whole tenants, so subscribed[t] has one writer.
func (o *destOutbox) createTenant(ctx context.Context, st *destinations.Store, tx pgx.Tx, t int, rv *receiver) error {
	for n := range destsPerTenant {
		pattern := destOtherPattern
		if n < destsSubscribed {
			pattern = destOrderPattern
		}
		c, err := st.Create(ctx, tx, benchActor, tenantID(t), destinations.Spec{URL: rv.url(t, n), Events: []string{pattern}})
		if err != nil {
			return err
		}
		if n < destsSubscribed {
			o.subscribed[t] = append(o.subscribed[t], c.ID)
		}
	}
	return nil
}

// destinations is how many destinations o holds.
func (o *destOutbox) destinations() int { return o.tenants * destsPerTenant }

// reset empties o's queue: its rows, their keys and history, rate limit
// and breaker state.
func (o *destOutbox) reset(ctx context.Context, pool *pgxpool.Pool) error {
	tables := []string{"messages", "message_keys", "messages_history", "failed_attempts", "sink_limits", "sink_key_limits", "destination_breakers"}
	ids := make([]string, len(tables))
	for i, t := range tables {
		ids[i] = pgx.Identifier{o.schema, t}.Sanitize()
	}
	_, err := pool.Exec(ctx, "TRUNCATE "+strings.Join(ids, ", ")+" RESTART IDENTITY")
	return err
}

// order is the event publish() fans out to tenant's subscribed
// destinations, keyed with the next sequence number.
func order(tenant int) (outboxd.Event, int64) {
	n := seq.Add(1)
	return outboxd.Event{Type: destEventType, Key: fmt.Sprintf("%s%d", eventKeyPrefix, n), Data: map[string]any{"account_id": tenantID(tenant), "n": n}}, n
}

// publishBacklog publishes events order events over o's tenants, in turn,
// destPublishBatch to a transaction.
func (o *destOutbox) publishBacklog(ctx context.Context, pool *pgxpool.Pool, events int) error {
	for done := 0; done < events; done += destPublishBatch {
		batch := make([]outboxd.Event, min(destPublishBatch, events-done))
		for i := range batch {
			batch[i], _ = order((done + i) % o.tenants)
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := o.ob.PublishBatch(ctx, tx, batch)
			return err
		}); err != nil {
			return fmt.Errorf("publish to %s: %w", o.schema, err)
		}
	}
	return nil
}

// destRelay is one in-process relay session on a destOutbox: its own
// pool (traced), the directory it loaded, and the relay.
type destRelay struct {
	pool   *pgxpool.Pool
	tracer *stmtTracer
	dir    *destinations.Directory
	// loaded is how long the directory's first read of every destination
	// took.
	loaded  time.Duration
	startNs int64
	cancel  context.CancelFunc
	done    chan error
	dirDone chan struct{}
}

// startDestRelay loads o's destinations into a directory and starts a
// relay with the destinations sink (defaults, but for rateLimit when it
// is not nil), as `outboxd serve` wires it: the directory published as
// the sinks' resource, and the routes' stage.
func (b *bench) startDestRelay(ctx context.Context, o *destOutbox, rv *receiver, rateLimit *sink.RateLimit) (*destRelay, error) {
	cfg, err := pgxpool.ParseConfig(b.dbURL(dbOutboxd))
	if err != nil {
		return nil, err
	}
	r := &destRelay{tracer: newStmtTracer(), done: make(chan error, 1), dirDone: make(chan struct{})}
	cfg.ConnConfig.Tracer = r.tracer
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := r.build(ctx, o, rv, rateLimit); err != nil {
		r.pool.Close()
		return nil, err
	}
	return r, nil
}

func (r *destRelay) build(ctx context.Context, o *destOutbox, rv *receiver, rateLimit *sink.RateLimit) error {
	// The relay's process has an Outbox of its own, on its own pool.
	ob, err := outboxd.New(r.pool, outboxd.Options{Schema: o.schema})
	if err != nil {
		return err
	}
	if r.dir, err = ob.Directory(o.keys, quietLogger()); err != nil {
		return err
	}
	loadCtx, cancelLoad := context.WithTimeout(ctx, destLoadTimeout)
	defer cancelLoad()
	start := time.Now()
	if err := r.dir.Refresh(loadCtx); err != nil {
		return err
	}
	r.loaded = time.Since(start)
	if got := r.dir.Len(); got != o.destinations() {
		return fmt.Errorf("the directory of %s holds %d destinations, want %d", o.schema, got, o.destinations())
	}
	resources := new(registry.Resources)
	resources.Publish(destinations.DirectoryResource, r.dir)
	customers, hook, err := destSinks(rv, resources)
	if err != nil {
		return err
	}
	table, err := destTable(customers, hook)
	if err != nil {
		return err
	}
	sc := relay.SinkConfig{Name: destSinkName, Type: destsink.Type.Name, Sink: customers, RateLimit: rateLimit}
	destinations.HookRelay(&sc) // each destination's own rate limit, as serve's relays have it
	rl, err := ob.NewRelay(relay.Config{
		Sinks:  []relay.SinkConfig{sc},
		Logger: quietLogger(),
		Stage:  table.Stage(nil),
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.dir.Run(runCtx); close(r.dirDone) }()
	r.startNs = time.Now().UnixNano()
	go func() { r.done <- rl.Run(runCtx) }()
	return nil
}

// stop stops the relay and the directory and closes the pool.
func (r *destRelay) stop() error {
	r.cancel()
	err := <-r.done
	<-r.dirDone
	r.pool.Close()
	return err
}
