package outboxd

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/internal/store"
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

// Outbox addresses one outbox: the tables in one PostgreSQL schema. Several
// independent outboxes can share a database. An Outbox holds no connection;
// every method takes the database handle to use, so it can run inside the
// caller's transaction. It is safe for concurrent use and cannot be changed
// once made.
type Outbox struct {
	q          *store.Queries
	maxPayload int
	enqueues   metric.Int64Counter

	// plainInsertPaused counts down the batches that skip EnqueueBatch's
	// plain INSERT after one hit a duplicate (see plainInsertPause).
	plainInsertPaused atomic.Int32
}

// New returns the Outbox that opts describe.
func New(opts Options) (*Outbox, error) {
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
	return &Outbox{q: q, maxPayload: opts.MaxPayloadBytes, enqueues: newEnqueueCounter(mp)}, nil
}

// defaultOutbox is the outbox of the package-level functions: DefaultSchema,
// default limits, the global meter provider. It is made at the first call,
// so an application that installs its meter provider at start-up counts
// its enqueues there.
var defaultOutbox = sync.OnceValue(func() *Outbox {
	o, err := New(Options{})
	if err != nil {
		panic(err) // DefaultSchema is a valid name
	}
	return o
})

// Schema returns the PostgreSQL schema holding this outbox.
func (o *Outbox) Schema() string { return o.q.Schema }
