package kafka

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// SASL mechanisms accepted by the sasl_mechanism option.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Options are the kafka sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// Brokers are the seed brokers, host:port each; the client learns the
	// rest of the cluster from them.
	Brokers []string `mapstructure:"brokers" defaultdoc:"required" doc:"seed brokers, host:port each; the client learns the rest of the cluster from them"`
	// Topic is each record's topic, a template over the message (see
	// sinks.AddressData), e.g. "orders" or "orders-{{.Sink}}". It
	// must exist: the sink does not create topics.
	Topic string `mapstructure:"topic" defaultdoc:"required" doc:"each record's topic, a template over the message such as orders-{{.Sink}}; it must exist"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
	// TLS connects to the brokers over TLS, verified against the system's
	// roots.
	TLS bool `mapstructure:"tls" doc:"connect to the brokers over TLS, verified against the system's roots"`
	// SASLMechanism enables SASL authentication: SASLPlain,
	// SASLScramSHA256 or SASLScramSHA512.
	SASLMechanism string `mapstructure:"sasl_mechanism" doc:"SASL authentication: plain, scram-sha-256 or scram-sha-512"`
	// Username authenticates with Password over SASL.
	Username string `mapstructure:"username" doc:"SASL user name, with password"`
	// Password goes with Username. It never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"SASL password, never logged nor shown"`
}

// DefaultOptions returns the options a kafka sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{PublishOptions: sinks.DefaultPublishOptions()}
}

// config is Options checked.
type config struct {
	Options
	topic sinks.Address
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat a secret.
func (o Options) check() (config, error) {
	c := config{Options: o}
	if len(c.Brokers) == 0 {
		return c, errors.New("option brokers: is required (host:port of at least one broker)")
	}
	for i, b := range c.Brokers {
		if host, port, err := net.SplitHostPort(strings.TrimSpace(b)); err != nil || host == "" || port == "" {
			return c, fmt.Errorf("option brokers[%d]: %q is not host:port", i, b)
		}
	}
	var err error
	if c.topic, err = sinks.ParseAddress(c.Topic); err != nil {
		return c, fmt.Errorf("option topic: %w", err)
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	switch c.SASLMechanism {
	case "":
		if c.Username != "" || c.Password != "" {
			return c, errors.New("options username and password need sasl_mechanism")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.Username == "" || c.Password == "" {
			return c, fmt.Errorf("option sasl_mechanism %s needs username and password", c.SASLMechanism)
		}
	default:
		return c, fmt.Errorf("option sasl_mechanism: %q is not one of %s, %s, %s", c.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	return c, nil
}
