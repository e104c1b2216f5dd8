package outboxd

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/routing"
)

// DefaultSchema is the PostgreSQL schema that holds the outbox tables unless
// told otherwise.
const DefaultSchema = store.DefaultSchema

// DefaultMaxPayloadBytes bounds one message's payload.
const DefaultMaxPayloadBytes = store.DefaultMaxPayloadBytes

// MaxSchemaNameBytes bounds a schema name so that the names derived from it
// (the notification channel) still fit in a PostgreSQL identifier.
const MaxSchemaNameBytes = store.MaxSchemaNameBytes

// DBTX is anything that can run a query: a *pgxpool.Pool, a *pgx.Conn or the
// caller's pgx.Tx. Passing a transaction makes the enqueue commit or roll
// back with the caller's business data.
type DBTX = store.DBTX

// Options configure an [Outbox]. The zero value is the outbox in
// DefaultSchema with the default limits, which the package-level functions
// use.
type Options struct {
	// Schema is the PostgreSQL schema holding the outbox; "" means
	// DefaultSchema.
	Schema string
	// MaxPayloadBytes bounds a payload's encoded size; 0 means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MeterProvider receives the enqueue counter; nil means the global one
	// (a no-op unless the application installed its own).
	MeterProvider metric.MeterProvider
}

// Outbox is the engine's front door for one outbox: the tables in one
// PostgreSQL schema (several independent outboxes can share a database).
// It produces in the caller's transaction (Enqueue, EnqueueBatch, Publish,
// PublishBatch: every call takes the database handle to write through),
// makes relays (NewRelay) and hands out the operator, the migrator, the
// routes and the destinations. All of them share one store and one audit
// trail, made by New. It is safe for concurrent use and cannot be changed
// once made.
type Outbox struct {
	pool       *pgxpool.Pool // relays and the destinations directory connect with it; nil for a producer only
	q          *store.Queries
	trail      *audit.Trail
	ops        *operator.Operator
	migrator   *migrate.Migrator
	routes     *routing.Versions
	maxPayload int
	enqueues   metric.Int64Counter

	// plainInsertPaused counts down the batches that skip EnqueueBatch's
	// plain INSERT after one hit a duplicate (see plainInsertPause).
	plainInsertPaused atomic.Int32
}

// New returns the Outbox that opts describe, whose relays and destinations
// directory connect with pool's configuration. New opens nothing. pool may
// be nil for an Outbox that only produces and operates through the handles
// its calls are given; NewRelay and Directory then fail.
//
// It makes the engine's one store and one audit trail: every part the
// Outbox hands out uses them, so there is one place that decides which
// schema the program works on.
func New(pool *pgxpool.Pool, opts Options) (*Outbox, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	q, err := store.New(opts.Schema)
	if err != nil {
		return nil, err
	}
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	trail := audit.New(q)
	return &Outbox{pool: pool, q: q, trail: trail, ops: operator.New(q, trail), migrator: migrate.New(q, trail),
		routes: routing.NewVersions(q, trail), maxPayload: opts.MaxPayloadBytes, enqueues: newEnqueueCounter(mp)}, nil
}

// defaultOutbox is the outbox of the package-level functions: DefaultSchema,
// default limits, the global meter provider. It is made at the first call,
// so an application that installs its meter provider at start-up counts
// its enqueues there.
var defaultOutbox = sync.OnceValue(func() *Outbox {
	o, err := New(nil, Options{})
	if err != nil {
		panic(err) // DefaultSchema is a valid name
	}
	return o
})

// Schema returns the PostgreSQL schema holding this outbox.
func (o *Outbox) Schema() string { return o.q.Schema }

// errNoPool is NewRelay's and Directory's error on an Outbox made without
// a pool.
var errNoPool = errors.New("outboxd: this Outbox was made without a pool (New(nil, ...)): it cannot connect a relay or a directory")

// NewRelay checks cfg and returns a relay of this outbox: it claims and
// delivers the rows of cfg's sinks, connecting with the Outbox's pool (see
// relay.Relay.Run). Run one in every process that delivers; relays
// coordinate through PostgreSQL alone.
func (o *Outbox) NewRelay(cfg relay.Config) (*relay.Relay, error) {
	if o.pool == nil {
		return nil, errNoPool
	}
	return relay.New(o.pool, o.q, o.ops, cfg)
}

// Operator returns what the people running this outbox ask of it: dead
// letters, redrive and purge, message lookups, sink pauses, stats.
func (o *Outbox) Operator() *operator.Operator { return o.ops }

// Migrator returns the migrations of this outbox's schema: Migrate creates
// or upgrades it, from any number of pods at once.
func (o *Outbox) Migrator() *migrate.Migrator { return o.migrator }

// Audit returns this outbox's audit trail: who did which operator action.
func (o *Outbox) Audit() *audit.Trail { return o.trail }

// Routes returns the routes applied to this outbox's schema: Apply makes a
// routing.Table the one Publish fans out with, Fallback is what a relay
// stage (routing.Table.Stage) reads the other versions' templates from.
func (o *Outbox) Routes() *routing.Versions { return o.routes }

// Destinations returns the store of this outbox's tenants' destinations,
// sealing new signing secrets with keys (nil: it cannot create a
// destination or rotate a secret, and can do the rest).
func (o *Outbox) Destinations(keys *destinations.Keyring) *destinations.Store {
	return destinations.NewStore(o.q, o.trail, keys)
}

// Directory returns the directory that the destinations sinks of this
// outbox's relays read tenants' destinations from, kept current through
// the Outbox's pool once it runs (destinations.Directory.Run), opening
// secrets with keys.
func (o *Outbox) Directory(keys *destinations.Keyring, log *slog.Logger) (*destinations.Directory, error) {
	if o.pool == nil {
		return nil, errNoPool
	}
	return destinations.NewDirectory(o.pool, o.q, keys, log)
}
