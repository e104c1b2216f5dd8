package core

import (
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
)

// DefaultSchema is the PostgreSQL schema that holds the outbox tables unless
// told otherwise.
const DefaultSchema = "outbox"

// DefaultMaxPayloadBytes bounds one message's payload.
const DefaultMaxPayloadBytes = 256 << 10

// schemaNamePattern keeps schema names to plain lower-case identifiers, so a
// name can never smuggle SQL even before it is quoted.
var schemaNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// wakeupChannelSuffix makes the outbox's notification channel from its
// schema name.
const wakeupChannelSuffix = "_outbox_wakeup"

// maxIdentifierBytes is PostgreSQL's limit on an identifier (NAMEDATALEN-1);
// longer names are silently truncated, or refused as a channel name.
const maxIdentifierBytes = 63

// MaxSchemaNameBytes bounds a schema name so that the names derived from it
// (the notification channel) still fit in a PostgreSQL identifier.
const MaxSchemaNameBytes = maxIdentifierBytes - len(wakeupChannelSuffix)

// Outbox addresses one outbox: the tables in one PostgreSQL schema. Several
// independent outboxes can share a database. An Outbox holds no connection;
// every method takes the database handle to use, so it can run inside the
// caller's transaction.
type Outbox struct {
	schema string
	// MaxPayloadBytes bounds a payload's encoded size; 0 means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MeterProvider receives the enqueue counter; nil means the global one
	// (a no-op unless the application installed its own). Set it before
	// the first enqueue.
	MeterProvider metric.MeterProvider

	channel string // pg_notify channel that wakes this outbox's relays
	sql     queries

	enqueuesOnce sync.Once
	enqueues     metric.Int64Counter

	// plainInsertPaused counts down the batches that skip EnqueueBatch's
	// plain INSERT after one hit a duplicate (see plainInsertPause).
	plainInsertPaused atomic.Int32
}

// New returns the Outbox stored in schema ("" means DefaultSchema).
func New(schema string) (*Outbox, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaNamePattern.MatchString(schema) {
		return nil, fmt.Errorf("outbox: invalid schema name %q: want lower-case letters, digits and underscores, starting with a letter", schema)
	}
	if len(schema) > MaxSchemaNameBytes {
		return nil, fmt.Errorf("outbox: schema name %q is %d bytes, over the limit of %d (its notification channel must fit PostgreSQL's %d-byte identifiers)",
			schema, len(schema), MaxSchemaNameBytes, maxIdentifierBytes)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	return &Outbox{
		schema:  schema,
		channel: schema + wakeupChannelSuffix,
		sql:     newQueries(ident),
	}, nil
}

// Default is the outbox in DefaultSchema, used by the package-level functions.
var Default = mustNew(DefaultSchema)

func mustNew(schema string) *Outbox {
	o, err := New(schema)
	if err != nil {
		panic(err)
	}
	return o
}

// Schema returns the PostgreSQL schema holding this outbox.
func (o *Outbox) Schema() string { return o.schema }

func (o *Outbox) maxPayload() int {
	if o.MaxPayloadBytes > 0 {
		return o.MaxPayloadBytes
	}
	return DefaultMaxPayloadBytes
}
