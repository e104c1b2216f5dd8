package nats

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/sinks"
)

// Options are the nats sink's options, as written in plugins.yaml, each
// declared here once (see package confschema).
type Options struct {
	// URL is the server, nats://host:4222 or tls://host:4222; several
	// servers of one cluster may be given comma-separated. Credentials in
	// the URL (nats://user:password@host) work and are never shown.
	URL string `mapstructure:"url" defaultdoc:"required" doc:"the server, nats://host:4222 or tls://host:4222, several of one cluster comma-separated; credentials in it are never shown"`
	// Subject is the subject each message is published on, a template over
	// the message (see sinks.AddressData), e.g. "orders.{{.Sink}}" or
	// "orders.{{or .OrderingKey \"unordered\"}}". A stream must cover it.
	Subject string `mapstructure:"subject" defaultdoc:"required" doc:"the subject each message is published on, a template over the message such as orders.{{.Sink}}; a stream must cover it"`
	// Stream, when set, is the stream the message must land in: a publish
	// that another stream (or none) would store is refused, permanently.
	Stream string `mapstructure:"stream" doc:"the stream a message must land in; a publish another stream (or none) would store fails permanently"`
	// PublishOptions are timeout, connect_timeout and max_in_flight.
	sinks.PublishOptions `mapstructure:",squash"`
	// Username authenticates with Password (instead of credentials in the
	// URL).
	Username string `mapstructure:"username" doc:"user name, with password (instead of credentials in the URL)"`
	// Password goes with Username. It never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"password of username, never logged nor shown"`
	// Token authenticates with a server token. It never appears in errors
	// or logs.
	Token confschema.Secret `mapstructure:"token" doc:"server token, never logged nor shown"`
	// CredentialsFile is the path of a .creds file (user JWT and NKey
	// seed) for servers in operator mode.
	CredentialsFile string `mapstructure:"credentials_file" doc:"path of a .creds file (user JWT and NKey seed), for servers in operator mode"`
	// NKeySeedFile is the path of a file holding an NKey seed, for
	// servers that authenticate users by NKey.
	NKeySeedFile string `mapstructure:"nkey_seed_file" doc:"path of a file holding an NKey seed, for servers that authenticate users by NKey"`
}

// DefaultOptions returns the options a nats sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{PublishOptions: sinks.DefaultPublishOptions()}
}

// config is Options checked.
type config struct {
	Options
	subject sinks.Address
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat the URL (it
// may hold a password) or a secret.
func (o Options) check() (config, error) {
	c := config{Options: o}
	if err := checkURLs(c.URL); err != nil {
		return c, fmt.Errorf("option url: %w", err)
	}
	var err error
	if c.subject, err = sinks.ParseAddress(c.Subject); err != nil {
		return c, fmt.Errorf("option subject: %w", err)
	}
	if c.Stream != "" && strings.ContainsAny(c.Stream, " \t\r\n.*>") {
		return c, fmt.Errorf("option stream: %q is not a stream name (no spaces, dots or wildcards)", c.Stream)
	}
	if err := c.PublishOptions.Check(); err != nil {
		return c, err
	}
	if c.Password != "" && c.Username == "" {
		return c, errors.New("option password is set but username is empty")
	}
	methods := 0
	for _, set := range []bool{c.Username != "", c.Token != "", c.CredentialsFile != "", c.NKeySeedFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return c, errors.New("options username, token, credentials_file and nkey_seed_file: set at most one of them")
	}
	return c, nil
}

// checkURLs checks a comma-separated list of server URLs without quoting
// them.
func checkURLs(list string) error {
	if list == "" {
		return errors.New("is required")
	}
	for i, raw := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("server %d is not a valid URL", i+1)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("server %d: scheme must be nats, tls, ws or wss, got %q", i+1, u.Scheme)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("server %d has no host", i+1)
		}
	}
	return nil
}
