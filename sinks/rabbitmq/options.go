package rabbitmq

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// DefaultContentType is the content-type property of every message: the
// payload is the enqueued JSON.
const DefaultContentType = "application/json"

// Options are the rabbitmq sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// URL is the broker, amqp://host:5672/vhost or amqps://...
	// Credentials in the URL (amqp://user:password@host) work and are
	// never shown; username and password override them.
	URL string `mapstructure:"url" defaultdoc:"required" doc:"the broker, amqp://host:5672/vhost or amqps://...; credentials in it are never shown"`
	// Exchange is the exchange messages are published to; empty is the
	// default exchange, which routes by queue name. It must exist.
	Exchange string `mapstructure:"exchange" defaultdoc:"the default exchange" doc:"the exchange messages are published to, which must exist; the default one routes by queue name"`
	// RoutingKey is each message's routing key, a template over the
	// message (see sinks.AddressData), e.g. "orders.{{.OrderingKey}}".
	// Empty suits fanout and headers exchanges.
	RoutingKey string `mapstructure:"routing_key" doc:"each message's routing key, a template over the message such as orders.{{.OrderingKey}}"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
	// Username authenticates with Password instead of the URL's user.
	Username string `mapstructure:"username" doc:"user name, with password, instead of the URL's user"`
	// Password goes with Username. It never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"password of username, never logged nor shown"`
}

// DefaultOptions returns the options a rabbitmq sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{PublishOptions: sinks.DefaultPublishOptions()}
}

// config is Options checked.
type config struct {
	Options
	routingKey sinks.Address
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat the URL (it
// may hold a password) or a secret.
func (o Options) check() (config, error) {
	c := config{Options: o}
	if c.URL == "" {
		return c, errors.New("option url: is required")
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return c, errors.New("option url: not an amqp:// or amqps:// URL with a host (and a numeric port, if any)")
	}
	if c.RoutingKey != "" {
		var err error
		if c.routingKey, err = sinks.ParseAddress(c.RoutingKey); err != nil {
			return c, fmt.Errorf("option routing_key: %w", err)
		}
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	if c.Password != "" && c.Username == "" {
		return c, errors.New("option password is set but username is empty")
	}
	return c, nil
}
