package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/confschema"
)

// DefaultAPIURL is the Slack Web API base URL used when api_url is unset.
const DefaultAPIURL = slackapi.APIURL

// Options are a slack sink's options (the `options` block of its
// plugins.yaml entry), each declared here once (see package confschema).
// Exactly one of Token and WebhookURL is set.
type Options struct {
	// Token is a bot token (xoxb-...): messages go through chat.postMessage.
	Token confschema.Secret `mapstructure:"token" doc:"bot token (xoxb-...): posts with chat.postMessage, exactly once thanks to dedupe"`
	// WebhookURL is an incoming-webhook URL: messages are posted to it.
	// Incoming webhooks cannot read history, so delivery is at-least-once.
	WebhookURL confschema.Secret `mapstructure:"webhook_url" doc:"incoming-webhook URL, instead of a token: at-least-once, no history to check"`
	// Channel is the default channel, an ID (C0123ABCD) or a name
	// ("#alerts"); a payload's channel overrides it. With dedupe on, a name
	// is resolved to its ID for the history check (needs channels:read and
	// groups:read), and "@user" is refused.
	Channel string `mapstructure:"channel" doc:"default channel, an ID (C0123ABCD) or a name (#alerts); a payload's channel overrides it"`
	// APIURL is the Slack Web API's base URL, for tests and proxies.
	APIURL    string `mapstructure:"api_url" doc:"the Slack Web API's base URL, for tests and proxies"`
	Username  string `mapstructure:"username" doc:"name the message is posted under"`
	IconEmoji string `mapstructure:"icon_emoji" doc:"emoji shown as the poster's icon, such as :mailbox:"`
	// Dedupe makes a retry after an uncertain attempt look in the channel's
	// history before posting again. Nil means on in token mode; it cannot be
	// turned on in webhook mode.
	Dedupe *bool `mapstructure:"dedupe" defaultdoc:"true with a token" doc:"before retrying an uncertain attempt, look for its post in the channel's history"`
	// AllowedChannels, when set, are the only channels besides Channel a
	// payload's channel may name (IDs or names, as Channel); a payload
	// naming another fails permanently. Unset, a payload may post to any
	// channel the token or webhook reaches.
	AllowedChannels []string `mapstructure:"allowed_channels" defaultdoc:"any channel" doc:"the only channels, besides channel, a payload may name; a payload naming another fails permanently"`
	// EscapeMentions shows a payload's mentions (@channel, @here,
	// @everyone, user groups and users) as text instead of notifying
	// anyone; see escapeMentions.
	EscapeMentions bool `mapstructure:"escape_mentions" doc:"show a payload's mentions (@channel, @here, users, groups) as text instead of notifying anyone"`
}

// allowsChannel reports whether a payload may post to channel: any
// channel without AllowedChannels, else the default channel and the
// allowed ones. Names compare without '#' and case, IDs as they are.
func (o Options) allowsChannel(channel string) bool {
	if len(o.AllowedChannels) == 0 || sameChannel(channel, o.Channel) {
		return true
	}
	for _, allowed := range o.AllowedChannels {
		if sameChannel(channel, allowed) {
			return true
		}
	}
	return false
}

// sameChannel reports whether a and b name the same channel.
func sameChannel(a, b string) bool {
	nameA, isNameA := channelName(a)
	nameB, isNameB := channelName(b)
	if isNameA || isNameB {
		return isNameA && isNameB && nameA == nameB
	}
	return a == b
}

// DefaultOptions returns the options a slack sink has before its options
// block applies.
func DefaultOptions() Options { return Options{APIURL: DefaultAPIURL} }

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never echo a token or
// webhook URL.
func (o Options) check() (Options, error) {
	if err := o.validate(); err != nil {
		return o, err
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		// slack-go appends the method name directly to the base URL.
		o.APIURL += "/"
	}
	return o, nil
}

func (o Options) validate() error {
	for i, c := range o.AllowedChannels {
		if strings.TrimPrefix(c, "#") == "" {
			return fmt.Errorf("option allowed_channels[%d]: empty channel", i)
		}
	}
	switch {
	case o.Token == "" && o.WebhookURL == "":
		return errors.New("set one of the options token (bot token) or webhook_url (incoming webhook)")
	case o.Token != "" && o.WebhookURL != "":
		return errors.New("options token and webhook_url exclude each other: set only one")
	}
	if o.WebhookURL != "" {
		if err := checkHTTPURL(string(o.WebhookURL)); err != nil {
			return fmt.Errorf("option webhook_url: %w", err) // the URL itself is secret
		}
		if o.Dedupe != nil && *o.Dedupe {
			return errors.New("option dedupe: incoming webhooks cannot read channel history; use a bot token for exactly-once delivery")
		}
		return nil
	}
	if err := checkHTTPURL(o.APIURL); err != nil {
		return fmt.Errorf("option api_url %q: %w", o.APIURL, err)
	}
	if o.dedupe() {
		if err := checkDedupeChannel(o.Channel); err != nil {
			return fmt.Errorf("option channel: %w", err)
		}
	}
	return nil
}

// dedupe reports whether history dedupe is on: by default in token mode.
func (o Options) dedupe() bool {
	if o.Dedupe != nil {
		return *o.Dedupe
	}
	return o.Token != ""
}

// checkHTTPURL accepts absolute http and https URLs. Its errors do not
// quote the URL.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// checkDedupeChannel refuses "@user" channels with dedupe on: the post lands
// in a DM whose ID the sink does not know, so no history can be read. Channel
// names are fine (see channelID); an empty channel too (each payload then
// names one).
func checkDedupeChannel(channel string) error {
	if strings.HasPrefix(channel, "@") {
		return fmt.Errorf("%q is a user: dedupe needs a channel, so use the DM's channel ID (D0123ABCD), or set dedupe: false", channel)
	}
	return nil
}
