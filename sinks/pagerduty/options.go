package pagerduty

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/outboxd/outboxd/confschema"
)

// DefaultEventsURL is PagerDuty's Events API v2 endpoint, used when
// events_url is unset.
const DefaultEventsURL = "https://events.pagerduty.com/v2/enqueue"

// DefaultSource is the event's payload.source when neither the payload nor
// the source option names one: PagerDuty requires a source.
const DefaultSource = "outboxd"

// DefaultSeverity is the event's payload.severity when neither the payload
// nor the severity option names one; PagerDuty requires a severity, and
// "error" is the level most alerting tools page with.
const DefaultSeverity = SeverityError

// DefaultTimeout bounds one request to PagerDuty when the timeout option is
// not set. The relay's delivery deadline bounds it too.
const DefaultTimeout = 10 * time.Second

// Options are a pagerduty sink's options (the `options` block of its
// plugins.yaml entry), each declared here once (see package confschema).
type Options struct {
	RoutingKey confschema.Secret `mapstructure:"routing_key" defaultdoc:"required" doc:"the integration key of an Events API v2 integration on a PagerDuty service (or a global event orchestration); a secret, never shown"`
	EventsURL  string            `mapstructure:"events_url" doc:"the Events API v2 enqueue endpoint, for proxies and tests"`
	Source     string            `mapstructure:"source" doc:"payload.source (the affected system) of a trigger whose payload names none"`
	Severity   string            `mapstructure:"severity" doc:"payload.severity of a trigger whose payload names none: critical, error, warning or info"`
	Timeout    time.Duration     `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
}

// DefaultOptions returns the options a pagerduty sink has before its
// options block applies.
func DefaultOptions() Options {
	return Options{EventsURL: DefaultEventsURL, Source: DefaultSource, Severity: DefaultSeverity, Timeout: DefaultTimeout}
}

// check checks what decoding cannot. Errors name the option at fault and
// never repeat the routing key.
func (o Options) check() error {
	if strings.TrimSpace(string(o.RoutingKey)) == "" {
		return errors.New("option routing_key: required (the integration key of the PagerDuty service's Events API v2 integration)")
	}
	u, err := url.Parse(o.EventsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("option events_url %q: want an absolute http or https URL", o.EventsURL)
	}
	if !validSeverity(o.Severity) {
		return fmt.Errorf("option severity %q: want one of %s", o.Severity, strings.Join(severities, ", "))
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("option timeout: must be positive, got %s", o.Timeout)
	}
	return nil
}
