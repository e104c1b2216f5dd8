package redis

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// Defaults of the redis sink's own options.
const (
	// DefaultDedupWindow is how long the sink remembers a delivery id: a
	// redelivery of the same row within it returns the entry already added
	// instead of adding another. A day covers the relay's lease and retry
	// backoff many times over, at the cost of one small key per message.
	DefaultDedupWindow = 24 * time.Hour
	// DefaultDedupPrefix starts the name of each de-duplication key,
	// followed by the delivery id.
	DefaultDedupPrefix = "outboxd:dedup:"
)

// Fields of each stream entry the sink writes; the fields option may not
// reuse them.
const (
	FieldID      = "id"      // the delivery id, "<sink>/<dedup key>"
	FieldPayload = "payload" // the JSON that was enqueued
	FieldHeaders = "headers" // the row's headers and the trace context, a JSON object
)

// Options are the redis sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// URL is the server, redis://[user:password@]host:6379/db or
	// rediss:// for TLS. A password in it works and is never shown.
	URL string `mapstructure:"url" defaultdoc:"required" doc:"the server, redis://host:6379/0 or rediss:// for TLS; a password in it is never shown"`
	// Stream is the key of the stream each message is added to, a template
	// over the message (see sinks.AddressData).
	Stream string `mapstructure:"stream" defaultdoc:"required" doc:"the stream each message is added to, a template over the message such as orders:{{.Sink}}"`
	// MaxLen trims the stream to about this many entries (XADD MAXLEN ~);
	// 0 keeps every entry.
	MaxLen int64 `mapstructure:"maxlen" doc:"trim the stream to about this many entries (XADD MAXLEN ~); 0 keeps every entry"`
	// Fields are extra fields of each entry, name to a template over the
	// message (see sinks.AddressData), beside id, payload and headers.
	Fields map[string]string `mapstructure:"fields" doc:"extra fields of each entry, name to a template over the message, beside id, payload and headers"`
	// DedupWindow is how long a delivery id is remembered, so that a
	// redelivery adds no second entry.
	DedupWindow time.Duration `mapstructure:"dedup_window" doc:"how long a delivery id is remembered: a redelivery within it adds no second entry"`
	// DedupPrefix starts each de-duplication key's name.
	DedupPrefix string `mapstructure:"dedup_prefix" doc:"the start of each de-duplication key's name, followed by the delivery id"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
	// Username authenticates with Password (Redis 6 ACL users); it and
	// Password replace credentials in the URL.
	Username string `mapstructure:"username" doc:"ACL user name, with password (instead of credentials in the URL)"`
	// Password authenticates, alone (requirepass) or with Username. It
	// never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"password (requirepass, or of username), never logged nor shown"`
}

// DefaultOptions returns the options a redis sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{
		DedupWindow: DefaultDedupWindow, DedupPrefix: DefaultDedupPrefix,
		PublishOptions: sinks.DefaultPublishOptions(),
	}
}

// config is Options checked.
type config struct {
	Options
	client *goredis.Options
	stream sinks.Address
	fields map[string]sinks.Address
	names  []string // of fields, sorted: entries list them in one order
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat the URL (it
// may hold a password) or a secret.
func (o Options) check() (config, error) {
	c := config{Options: o}
	if c.URL == "" {
		return c, errors.New("option url: is required")
	}
	var err error
	if c.client, err = goredis.ParseURL(c.URL); err != nil {
		return c, errors.New("option url: not a redis://, rediss:// or unix:// URL of a server")
	}
	if c.stream, err = sinks.ParseAddress(c.Stream); err != nil {
		return c, fmt.Errorf("option stream: %w", err)
	}
	c.names = slices.Sorted(maps.Keys(c.Fields))
	c.fields = make(map[string]sinks.Address, len(c.Fields))
	for _, name := range c.names {
		switch name {
		case "", FieldID, FieldPayload, FieldHeaders:
			return c, fmt.Errorf("option fields: %q is not a field name of its own (id, payload and headers are the sink's)", name)
		}
		if c.fields[name], err = sinks.ParseAddress(c.Fields[name]); err != nil {
			return c, fmt.Errorf("option fields.%s: %w", name, err)
		}
	}
	if c.MaxLen < 0 {
		return c, fmt.Errorf("option maxlen: must be 0 (no trimming) or positive, got %d", c.MaxLen)
	}
	if c.DedupWindow < time.Millisecond {
		return c, fmt.Errorf("option dedup_window: must be at least 1ms, got %s", c.DedupWindow)
	}
	if c.DedupPrefix == "" {
		return c, errors.New("option dedup_prefix: must not be empty (the keys would be bare delivery ids)")
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	return c, nil
}
