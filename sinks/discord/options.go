package discord

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/outboxd/outboxd/confschema"
)

// DefaultTimeout bounds one request to Discord when the timeout option is
// not set. The relay's delivery deadline bounds it too.
const DefaultTimeout = 10 * time.Second

// Discord's documented bounds on what a webhook message may carry; the
// sink refuses a payload or option beyond them before sending, with an
// error naming the field (Discord's own answer, 50035 Invalid Form Body,
// names it less plainly).
const (
	MaxContentRunes  = 2000
	MaxEmbeds        = 10
	MaxUsernameRunes = 80
	MaxThreadName    = 100
)

// The mention types Discord may parse from a message's content
// (allowed_mentions.parse); the allowed_mentions option lists some of them.
const (
	MentionUsers    = "users"
	MentionRoles    = "roles"
	MentionEveryone = "everyone"
)

// mentionTypes are the values allowed_mentions accepts, in Discord's order.
var mentionTypes = []string{MentionUsers, MentionRoles, MentionEveryone}

// Options are a discord sink's options (the `options` block of its
// plugins.yaml entry), each declared here once (see package confschema).
type Options struct {
	// WebhookURL is the webhook's URL, whose path holds its token: a
	// secret, never printed.
	WebhookURL confschema.Secret `mapstructure:"webhook_url" defaultdoc:"required" doc:"the webhook's URL, https://discord.com/api/webhooks/<id>/<token>: a secret (its path holds the token)"`
	// Username overrides the webhook's name on each message.
	Username string `mapstructure:"username" doc:"name the messages are posted under, instead of the webhook's; a payload's username overrides it"`
	// AvatarURL overrides the webhook's avatar on each message.
	AvatarURL string `mapstructure:"avatar_url" doc:"image URL shown as the poster's avatar, instead of the webhook's"`
	// ThreadID posts every message into that thread of the webhook's
	// channel, unless the payload names another thread.
	ThreadID string `mapstructure:"thread_id" doc:"post into this existing thread of the webhook's channel (a payload's thread_id or thread_name overrides it)"`
	// AllowedMentions are the mention types Discord may turn into pings.
	AllowedMentions []string      `mapstructure:"allowed_mentions" defaultdoc:"none" doc:"mention types Discord may ping from a message's content: users, roles, everyone; none by default, so a producer cannot ping @everyone"`
	Timeout         time.Duration `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	// AllowPrivate lets the sink reach loopback and private addresses: a
	// proxy, or a test's fake Discord.
	AllowPrivate bool `mapstructure:"allow_private" doc:"let the sink reach loopback, private and link-local addresses (a proxy, a test server), refused by default"`
}

// DefaultOptions returns the options a discord sink has before its options
// block applies.
func DefaultOptions() Options { return Options{Timeout: DefaultTimeout} }

// webhookPath matches the end of a webhook URL's path: its id (a
// snowflake) and its token.
var webhookPath = regexp.MustCompile(`/webhooks/([0-9]+)/([^/]+)/?$`)

// config is Options checked: what the sink runs with.
type config struct {
	Options
	// execute is the webhook's URL without query: POST executes it, GET
	// reads the webhook, PATCH .../messages/<id> edits a message.
	execute *url.URL
	// webhookID is the public part of the URL, the rate key.
	webhookID string
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat the webhook
// URL, whose path is its credential.
func (o Options) check() (config, error) {
	c := config{Options: o}
	if o.WebhookURL == "" {
		return c, errors.New("option webhook_url: required (https://discord.com/api/webhooks/<id>/<token>)")
	}
	u, err := url.Parse(string(o.WebhookURL))
	switch {
	case err != nil:
		return c, errors.New("option webhook_url: not a valid URL")
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return c, errors.New("option webhook_url: want an absolute https URL")
	case u.RawQuery != "" || u.Fragment != "":
		return c, errors.New("option webhook_url: want the URL without a query or fragment (set thread_id with the thread_id option)")
	}
	m := webhookPath.FindStringSubmatch(u.Path)
	if m == nil {
		return c, errors.New("option webhook_url: its path must end in /webhooks/<id>/<token>")
	}
	c.execute, c.webhookID = u, m[1]
	c.execute.Path = strings.TrimSuffix(u.Path, "/")
	if c.Timeout <= 0 {
		return c, fmt.Errorf("option timeout: must be positive, got %s", c.Timeout)
	}
	if err := checkUsername(o.Username); err != nil {
		return c, fmt.Errorf("option username: %w", err)
	}
	if o.AvatarURL != "" {
		if a, err := url.Parse(o.AvatarURL); err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" {
			return c, errors.New("option avatar_url: want an absolute http or https URL")
		}
	}
	if err := checkSnowflake(o.ThreadID); err != nil {
		return c, fmt.Errorf("option thread_id: %w", err)
	}
	for i, m := range o.AllowedMentions {
		if !slices.Contains(mentionTypes, m) {
			return c, fmt.Errorf("option allowed_mentions[%d]: %q is not one of %s", i, m, strings.Join(mentionTypes, ", "))
		}
	}
	return c, nil
}

// checkUsername applies Discord's rules for a webhook message's username:
// at most MaxUsernameRunes, and neither "discord" nor "clyde" in it.
func checkUsername(name string) error {
	if n := len([]rune(name)); n > MaxUsernameRunes {
		return fmt.Errorf("%d characters, Discord takes at most %d", n, MaxUsernameRunes)
	}
	lower := strings.ToLower(name)
	for _, banned := range []string{"discord", "clyde"} {
		if strings.Contains(lower, banned) {
			return fmt.Errorf("it contains %q, which Discord refuses in a username", banned)
		}
	}
	return nil
}

// checkSnowflake accepts "" or a Discord id: decimal digits.
func checkSnowflake(id string) error {
	if id == "" {
		return nil
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return fmt.Errorf("%q is not a Discord id (digits only)", id)
		}
	}
	return nil
}
