package mqtt

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// DefaultQoS is the quality of service of each publish: 1, at least once,
// a publish counting as delivered when the broker's PUBACK arrives.
const DefaultQoS = 1

// Options are the mqtt sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// URL is the broker, tcp://host:1883, ssl://host:8883 or ws://host/mqtt.
	// Credentials in it (tcp://user:password@host:1883) work and are never
	// shown.
	URL string `mapstructure:"url" defaultdoc:"required" doc:"the broker, tcp://host:1883, ssl://host:8883, ws:// or wss://; credentials in it are never shown"`
	// Topic is the topic each message is published on, a template over the
	// message (see sinks.AddressData), e.g. "orders/{{.Sink}}".
	Topic string `mapstructure:"topic" defaultdoc:"required" doc:"the topic each message is published on, a template over the message such as orders/{{.Sink}}"`
	// QoS is 1 (at least once, delivered at the broker's PUBACK) or 0 (at
	// most once, delivered when written).
	QoS int `mapstructure:"qos" doc:"1: at least once, delivered when the broker's PUBACK arrives; 0: at most once, delivered when written"`
	// Retain asks the broker to keep the last message of each topic for
	// subscribers that come later.
	Retain bool `mapstructure:"retain" doc:"the broker keeps each topic's last message for later subscribers"`
	// ClientID identifies the connection to the broker; by default
	// "outboxd-<sink>-<host>-<pid>". Two connections with one client id
	// take the session from each other.
	ClientID string `mapstructure:"client_id" defaultdoc:"outboxd-<sink>-<host>-<pid>" doc:"the client id of the connection; two connections must not share one"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
	// Username authenticates with Password (instead of credentials in the
	// URL).
	Username string `mapstructure:"username" doc:"user name, with password (instead of credentials in the URL)"`
	// Password goes with Username. It never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"password of username, never logged nor shown"`
}

// DefaultOptions returns the options an mqtt sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{QoS: DefaultQoS, PublishOptions: sinks.DefaultPublishOptions()}
}

// maxClientID is the longest client id the sink sends: MQTT 3.1.1 (3.1.3.1)
// makes brokers accept 23 bytes and lets them accept more; 65535 is what
// the protocol's length prefix can carry.
const maxClientID = 65535

// config is Options checked.
type config struct {
	Options
	topic sinks.Address
}

// check checks what decoding cannot and returns the options as the sink
// called name runs them. Errors name the option at fault and never repeat
// the URL (it may hold a password) or a secret.
func (o Options) check(name string) (config, error) {
	c := config{Options: o}
	if c.URL == "" {
		return c, errors.New("option url: is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return c, errors.New("option url: not a valid URL")
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss":
	default:
		return c, fmt.Errorf("option url: scheme must be tcp, mqtt, ssl, tls, mqtts, ws or wss, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return c, errors.New("option url: has no host")
	}
	if c.topic, err = sinks.ParseAddress(c.Topic); err != nil {
		return c, fmt.Errorf("option topic: %w", err)
	}
	if c.QoS != 0 && c.QoS != 1 {
		return c, fmt.Errorf("option qos: must be 0 or 1, got %d (QoS 2's exactly once covers one hop only: use 1 and de-duplicate on the delivery id)", c.QoS)
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID(name)
	}
	if len(c.ClientID) > maxClientID {
		return c, fmt.Errorf("option client_id: longer than %d bytes", maxClientID)
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	if c.Password != "" && c.Username == "" {
		return c, errors.New("option password is set but username is empty")
	}
	return c, nil
}

// defaultClientID is "outboxd-<sink>-<host>-<pid>": unique per sink and
// relay process, so two relays (or two processes on one host) never take
// each other's connection, which a broker does to the older of two
// clients with one id.
func defaultClientID(sink string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return "outboxd-" + sink + "-" + host + "-" + strconv.Itoa(os.Getpid())
}
