package store

import (
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// schemaNamePattern keeps schema names to plain lower-case identifiers, so a
// name can never smuggle SQL even before it is quoted.
var schemaNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// wakeupChannelSuffix makes the outbox's notification channel from its
// schema name.
const wakeupChannelSuffix = "_outbox_wakeup"

// maxIdentifierBytes is PostgreSQL's limit on an identifier (NAMEDATALEN-1);
// longer names are silently truncated, or refused as a channel name.
const maxIdentifierBytes = 63

// DefaultSchema is the PostgreSQL schema that holds the outbox tables unless
// told otherwise.
const DefaultSchema = "outbox"

// DefaultMaxPayloadBytes bounds one message's payload unless told otherwise.
const DefaultMaxPayloadBytes = 256 << 10

// MaxSchemaNameBytes bounds a schema name so that the names derived from it
// (the notification channel) still fit in a PostgreSQL identifier.
const MaxSchemaNameBytes = maxIdentifierBytes - len(wakeupChannelSuffix)

// New returns the statements of the outbox stored in schema, after checking
// that the name is a plain identifier that fits (the one value ever spliced
// into a statement).
func New(schema string) (*Queries, error) {
	if !schemaNamePattern.MatchString(schema) {
		return nil, fmt.Errorf("outbox: invalid schema name %q: want lower-case letters, digits and underscores, starting with a letter", schema)
	}
	if len(schema) > MaxSchemaNameBytes {
		return nil, fmt.Errorf("outbox: schema name %q is %d bytes, over the limit of %d (its notification channel must fit PostgreSQL's %d-byte identifiers)",
			schema, len(schema), MaxSchemaNameBytes, maxIdentifierBytes)
	}
	return newQueries(schema, pgx.Identifier{schema}.Sanitize()), nil
}
