package teams

import (
	"fmt"
	"time"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// DefaultTimeout bounds one request to the workflow when the timeout
// option is not set. The relay's delivery deadline bounds it too.
const DefaultTimeout = 10 * time.Second

// DefaultAllowPrivate lets the sink reach private addresses unless
// allow_private is false: the URL is the operator's own, as a Slack
// webhook's, and proxies and test servers live on private addresses.
// Set it false when the URL comes from someone else.
const DefaultAllowPrivate = true

// Options are a teams sink's options (the `options` block of its
// plugins.yaml entry), each declared here once (see package confschema).
type Options struct {
	// URL is the Workflows webhook's URL. Its sig query parameter is the
	// credential, so the whole URL is a secret.
	URL          confschema.Secret `mapstructure:"url" defaultdoc:"required" doc:"the Workflows webhook URL (When a Teams webhook request is received); its sig parameter is the credential"`
	Timeout      time.Duration     `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	AllowPrivate bool              `mapstructure:"allow_private" doc:"let the sink reach loopback, private and link-local addresses (a proxy, a test server); false refuses them, for a URL that comes from someone else"`
}

// DefaultOptions returns the options a teams sink has before its options
// block applies.
func DefaultOptions() Options {
	return Options{Timeout: DefaultTimeout, AllowPrivate: DefaultAllowPrivate}
}

// check checks what decoding cannot. Its errors name the option at fault
// and never quote the URL, which carries the webhook's signature.
func (o Options) check() error {
	if err := standardwebhooks.CheckURL(string(o.URL)); err != nil {
		return fmt.Errorf("option url: %w", err)
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("option timeout: must be positive, got %s", o.Timeout)
	}
	return nil
}
