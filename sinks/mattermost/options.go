package mattermost

import (
	"fmt"
	"time"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// DefaultTimeout bounds one request to Mattermost when the timeout option
// is not set. The relay's delivery deadline bounds it too.
const DefaultTimeout = 10 * time.Second

// DefaultAllowPrivate lets the sink reach private addresses unless
// allow_private is false: Mattermost is mostly self-hosted, often on a
// private network, and the URL is the operator's own. Set it false when
// the URL comes from someone else.
const DefaultAllowPrivate = true

// Options are a mattermost sink's options (the `options` block of its
// plugins.yaml entry), each declared here once (see package confschema).
type Options struct {
	// URL is the incoming webhook's URL, https://<server>/hooks/<key>: the
	// key is the credential, so the whole URL is a secret.
	URL          confschema.Secret `mapstructure:"url" defaultdoc:"required" doc:"the incoming webhook's URL, https://<server>/hooks/<key>; the key is the credential"`
	Channel      string            `mapstructure:"channel" defaultdoc:"the webhook's channel" doc:"channel to post to (its name in URLs, such as town-square, or @user for a direct message); a payload's channel overrides it"`
	Username     string            `mapstructure:"username" defaultdoc:"the webhook's" doc:"name the posts appear under (needs the server's EnablePostUsernameOverride)"`
	IconURL      string            `mapstructure:"icon_url" defaultdoc:"the webhook's" doc:"picture the posts appear with (needs the server's EnablePostIconOverride)"`
	Timeout      time.Duration     `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	AllowPrivate bool              `mapstructure:"allow_private" doc:"let the sink reach loopback, private and link-local addresses (a Mattermost server on the local network); false refuses them, for a URL that comes from someone else"`
}

// DefaultOptions returns the options a mattermost sink has before its
// options block applies.
func DefaultOptions() Options {
	return Options{Timeout: DefaultTimeout, AllowPrivate: DefaultAllowPrivate}
}

// check checks what decoding cannot. Its errors name the option at fault
// and never quote the webhook's URL.
func (o Options) check() error {
	if err := standardwebhooks.CheckURL(string(o.URL)); err != nil {
		return fmt.Errorf("option url: %w", err)
	}
	if o.IconURL != "" {
		if err := standardwebhooks.CheckURL(o.IconURL); err != nil {
			return fmt.Errorf("option icon_url: %w", err)
		}
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("option timeout: must be positive, got %s", o.Timeout)
	}
	return nil
}
